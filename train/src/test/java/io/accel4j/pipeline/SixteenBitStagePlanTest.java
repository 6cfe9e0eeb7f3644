package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.CountingMemory;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * {@link StagePlan} under 16-bit activation storage against what each rank's backend memory holds after a step,
 * counted by the allocator (as {@code StagePlanTest} does for fp32): tp=2 × pp=2 under 1F1B in bf16 and dp=2 × pp=2
 * with ZeRO-1 under GPipe in fp16, every rank's bytes equal to its plan part by part (the slots' 16-bit stores and the
 * one fp32 working set they share), and each stage's plan smaller than fp32 storage's.
 */
class SixteenBitStagePlanTest {

    record Case(int D, int T, int zero, Schedule schedule, int M, DType storage) {}

    @Test
    void everyRankHoldsWhatItsSixteenBitPlanSays() {
        var c = PipelineGpt2Test.TINY;
        for (Case k : List.of(new Case(1, 2, 0, Schedule.ONE_F_ONE_B, 4, DType.BF16),
                new Case(2, 1, 1, Schedule.GPIPE, 3, DType.FP16))) {
            int P = 2, world = k.D() * k.T() * P;
            CountingMemory[] mem = new CountingMemory[world];
            List<Parallel> pools = new ArrayList<>();
            for (int i = 0; i < world; i++) {
                mem[i] = new CountingMemory();
                pools.add(new Parallel(1));
            }
            StagedModel model = k.T() > 1 ? Gpt2Stages.parallel(c) : Gpt2Stages.of(c);
            try (Learner l = PipelineGpt2Test.gpt2().ranks(world).tensorParallel(k.T()).zero(k.zero())
                    .activationStorage(k.storage()).backend(r -> mem[r].ops(new CpuOps(pools.get(r))))
                    .pipeline(model, P, k.M(), k.schedule()).build()) {
                l.fit(1, null);
                Partition split = Partition.balanced(model.parameters(), P);
                PipelineRank.Options fp32 = new PipelineRank.Options(PipelineGpt2Test.B, PipelineGpt2Test.T, k.M(),
                        c.V(), c.V(), DType.FP32, Recompute.NONE, AdamW.of(0.01f), LrSchedule.constant(1e-3f), 0f,
                        11);
                PipelineRank.Options o = fp32.storing(k.storage());
                for (int i = 0; i < world; i++) { // world rank = pp·(D·T) + dp·T + tp
                    int stage = i / (k.D() * k.T()), dp = i / k.T() % k.D();
                    StagePlan plan = StagePlan.of(model, split, k.schedule(), o, stage, k.T(), dp, k.D(), k.zero());
                    PipelineRank r = l.stages().get(i);
                    long state = 0;
                    for (MemorySegment m : r.optimizer().state().values()) {
                        state += m.byteSize();
                    }
                    assertThat(plan.parameterBytes()).as("%s rank %d", k, i).isEqualTo(r.network().parameterBytes());
                    assertThat(plan.optimizerBytes()).as("%s rank %d", k, i).isEqualTo(state);
                    assertThat(plan.slotBytes()).as("%s rank %d", k, i).isEqualTo(r.network().slotBytes());
                    assertThat(plan.workingBytes()).as("%s rank %d", k, i).isEqualTo(r.network().workingBytes())
                            .isPositive();
                    assertThat(plan.slots()).as("%s rank %d", k, i).isEqualTo(r.network().slotsAllocated());
                    assertThat(plan.total()).as("%s rank %d: bytes live", k, i).isEqualTo(mem[i].live.get());
                    StagePlan full = StagePlan.of(model, split, k.schedule(), fp32, stage, k.T(), dp, k.D(),
                            k.zero());
                    assertThat(full.workingBytes()).isZero();
                    assertThat(plan.slotBytes() * plan.slots() + plan.workingBytes())
                            .as("%s rank %d: activations in 16 bits", k, i).isLessThan(full.slotBytes() * full.slots());
                }
            } finally {
                pools.forEach(Parallel::close);
            }
        }
    }

    /**
     * GPT-2 124M at T = 1024, micro-batches of B = 4, M = 4 under 1F1B: each rank's activations (the slots alive and
     * the shared working set; or the tensor rank's network) under bf16 storage against fp32 storage, from the plans
     * (the figures of docs/PERFORMANCE.md). A block keeps 7.5C 16-bit pairs + 4 + NH fp32 of its 17C + 4 + NH floats
     * per position, and the fp32 rest (the residual stream between blocks, the logits) stays, so the ratio lies
     * between 0.45 and 0.8 wherever a rank holds more than one block's activations.
     */
    @Test
    void gpt2sActivationsPerRankShrinkUnderBf16Storage() {
        var g = io.accel4j.train.model.GptConfig.preset("gpt2");
        int B = 4, T = 1024, M = 4;
        PipelineRank.Options fp32 = new PipelineRank.Options(B, T, M, g.V(), g.V(), DType.FP32, Recompute.NONE,
                AdamW.of(0.01f), LrSchedule.constant(1e-3f), 0f, 11);
        for (int t : new int[] {1, 2}) {
            StagedModel model = t > 1 ? Gpt2Stages.parallel(g) : Gpt2Stages.of(g);
            Partition split = Partition.balanced(model.parameters(), 2);
            for (int stage = 0; stage < 2; stage++) {
                StagePlan a = StagePlan.of(model, split, Schedule.ONE_F_ONE_B, fp32, stage, t, 0, 1, 0);
                StagePlan b = StagePlan.of(model, split, Schedule.ONE_F_ONE_B, fp32.storing(DType.BF16), stage, t, 0,
                        1, 0);
                long actA = a.slotBytes() * a.slots(), actB = b.slotBytes() * b.slots() + b.workingBytes();
                double ratio = (double) actB / actA;
                System.out.printf(Locale.ROOT, "gpt2 %spp2 stage %d (%d slots): activations fp32 %.1f MiB, bf16 %.1f "
                                + "MiB (%.2f); rank %.1f -> %.1f MiB (%.2f)%n", t > 1 ? "tp2 x " : "", stage, a.slots(),
                        actA / 1048576.0, actB / 1048576.0, ratio, a.total() / 1048576.0, b.total() / 1048576.0,
                        (double) b.total() / a.total());
                assertThat(b.total() - actB).isEqualTo(a.total() - actA); // only the activations change
                assertThat(ratio).as("tp %d stage %d", t, stage).isBetween(0.45, 0.8);
            }
        }
        for (int t : new int[] {2, 4}) {
            io.accel4j.train.TrainConfig.Builder cfg = io.accel4j.train.TrainConfig.builder().batch(B).seq(T).steps(1);
            var a = io.accel4j.cli.train.TensorParallelPlan.of(g, cfg.precision(
                    io.accel4j.train.precision.Precision.FP32).build(), t, t);
            var b = io.accel4j.cli.train.TensorParallelPlan.of(g, cfg.precision(
                    io.accel4j.train.precision.Precision.of(DType.BF16)).build(), t, t);
            double ratio = (double) b.activations() / a.activations();
            System.out.printf(Locale.ROOT, "gpt2 tp%d: activations fp32 %.1f MiB, bf16 %.1f MiB (%.2f); rank %.1f -> "
                    + "%.1f MiB (%.2f)%n", t, a.activations() / 1048576.0, b.activations() / 1048576.0, ratio,
                    a.total() / 1048576.0, b.total() / 1048576.0, (double) b.total() / a.total());
            assertThat(ratio).as("tp %d", t).isBetween(0.45, 0.8);
        }
    }

    /** Under layer recomputation nothing is stored: the 16-bit plan is fp32's, with no shared working set. */
    @Test
    void underLayerRecomputationTheSixteenBitPlanIsFp32s() {
        var c = PipelineGpt2Test.TINY;
        StagedModel model = Gpt2Stages.of(c);
        Partition split = Partition.balanced(model.parameters(), 2);
        PipelineRank.Options fp32 = new PipelineRank.Options(PipelineGpt2Test.B, PipelineGpt2Test.T, 4, c.V(), c.V(),
                DType.FP32, Recompute.LAYER, AdamW.of(0.01f), LrSchedule.constant(1e-3f), 0f, 11);
        for (int stage = 0; stage < 2; stage++) {
            StagePlan half = StagePlan.of(model, split, Schedule.ONE_F_ONE_B, fp32.storing(DType.BF16), stage, 1, 0, 1,
                    0);
            assertThat(half).isEqualTo(StagePlan.of(model, split, Schedule.ONE_F_ONE_B, fp32, stage, 1, 0, 1, 0));
        }
    }
}
