package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import io.accel4j.train.CountingMemory;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The per-rank memory plan of a pipeline ({@link StagePlan}, printed at the start) against what each rank's backend
 * memory holds after a step, counted by the allocator: tp=2 × pp=2 under 1F1B and dp=2 × pp=2 with ZeRO-1 under
 * GPipe, every rank's bytes equal to its plan, part by part.
 */
class StagePlanTest {

    record Case(int D, int T, int zero, Schedule schedule, int M) {}

    @Test
    void everyRankHoldsWhatItsPlanSays() {
        var c = PipelineGpt2Test.TINY;
        for (Case k : List.of(new Case(1, 2, 0, Schedule.ONE_F_ONE_B, 4), new Case(2, 1, 1, Schedule.GPIPE, 3))) {
            int P = 2, world = k.D() * k.T() * P;
            CountingMemory[] mem = new CountingMemory[world];
            List<Parallel> pools = new ArrayList<>();
            for (int i = 0; i < world; i++) {
                mem[i] = new CountingMemory();
                pools.add(new Parallel(1));
            }
            StagedModel model = k.T() > 1 ? Gpt2Stages.parallel(c) : Gpt2Stages.of(c);
            try (Learner l = PipelineGpt2Test.gpt2().ranks(world).tensorParallel(k.T()).zero(k.zero())
                    .backend(r -> mem[r].ops(new CpuOps(pools.get(r))))
                    .pipeline(model, P, k.M(), k.schedule()).build()) {
                l.fit(1, null);
                Partition split = Partition.balanced(model.parameters(), P);
                PipelineRank.Options o = new PipelineRank.Options(PipelineGpt2Test.B, PipelineGpt2Test.T, k.M(),
                        c.V(), c.V(), DType.FP32, Recompute.NONE, AdamW.of(0.01f), LrSchedule.constant(1e-3f), 0f,
                        11);
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
                    assertThat(plan.slots()).as("%s rank %d", k, i).isEqualTo(r.network().slotsAllocated());
                    assertThat(plan.total()).as("%s rank %d: bytes live", k, i).isEqualTo(mem[i].live.get());
                }
            } finally {
                pools.forEach(Parallel::close);
            }
        }
    }
}
