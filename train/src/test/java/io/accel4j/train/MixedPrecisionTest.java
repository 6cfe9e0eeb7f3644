package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Training in bf16 and fp16 ({@link Precision}) on the GPT-2 learner {@code accel4j train} builds
 * ({@link Gpt2Fixtures}, activations stored in fp32): fp16's overflow skips and backs off, clean steps grow the scale, the
 * scaler survives a checkpoint bit for bit and agrees across ranks, both precisions learn and track fp32, and fp32 is
 * still exactly the plain llm.c step.
 */
class MixedPrecisionTest {

    /** 2^40: the logits' gradient seed is 2^40/(B·T) ≈ 10^11, far past fp16's 65504, so the first step overflows. */
    private static final float HUGE_SCALE = 0x1p40f;
    /**
     * How far the first steps' losses of bf16/fp16 runs may be from fp32's, absolute (the losses are ~2.4 nats).
     * Step 0 differs only by the forward's operand rounding: relative 2^-9 (bf16) or 2^-12 (fp16) per operand, over
     * C = 16-term dot products of O(1) values, moves logits by ~1e-2 at most and the mean loss by less (fp16 8× less
     * than bf16). Steps 1–4 also carry the rounded gradients' slightly different updates, hence the room.
     */
    private static final double BF16_LOSS_TOL = 2e-2;
    private static final double FP16_LOSS_TOL = 5e-3;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(7));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        pool.close();
    }

    private static TrainConfig.Builder base(Precision p) {
        return Gpt2Fixtures.base().precision(p);
    }

    private static Precision fp16(float scale, int window) {
        return new Precision(DType.FP16, scale, window);
    }

    @Test
    void fp16OverflowSkipsAndBacksOff() throws IOException {
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base(fp16(HUGE_SCALE, 1000)).build(), trainFile, null, 1)) {
            float[] before = t.parameters();
            StepMetrics s0 = t.trainStep();

            assertThat(s0.skipped()).isTrue();
            assertThat(s0.lossScale()).isEqualTo(HUGE_SCALE);
            assertThat(s0.skippedSteps()).isEqualTo(1);
            assertThat(s0.trainLoss()).as("the forward is not scaled").isFinite();
            assertThat(s0.gradNorm()).isNaN();
            assertThat(t.parameters()).as("no update").containsExactly(before);
            assertThat(t.learner().lossScaler().scale()).isEqualTo(HUGE_SCALE * LossScaler.BACKOFF);
            assertThat(t.step()).as("the step still counts").isEqualTo(1);
            assertThat(s0.toJson()).contains("\"loss_scale\":1.0995116E12", "\"skipped\":true",
                    "\"skipped_steps\":1").doesNotContain("grad_norm");

            // it backs off step after step until the gradients fit, then updates
            StepMetrics s = s0;
            while (s.skipped()) {
                s = t.trainStep();
            }
            int skipped = s.skippedSteps();
            // the first scale that fits is ~2^18 here (the seed gradient 2^18/(B·T) ≈ 2^15 grows in backward)
            assertThat(skipped).isBetween(10, 30);
            assertThat(t.learner().lossScaler().scale()).isEqualTo(Math.scalb(HUGE_SCALE, -skipped));
            assertThat(s.lossScale()).isEqualTo(t.learner().lossScaler().scale());
            assertThat(s.gradNorm()).isFinite().isPositive();
            assertThat(s.toJson()).contains("\"skipped\":false", "\"grad_norm\":");
            assertThat(t.parameters()).as("updated").isNotEqualTo(before);
        }
    }

    @Test
    void cleanStepsGrowTheScaleAfterEachWindow() throws IOException {
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base(fp16(0x1p8f, 3)).steps(7).build(), trainFile, null, 1)) {
            for (int s = 0; s < 7; s++) {
                StepMetrics sm = t.trainStep();
                assertThat(sm.skipped()).as("step %d", s).isFalse();
                assertThat(sm.lossScale()).as("step %d", s).isEqualTo(Math.scalb(0x1p8f, s / 3));
            }
            assertThat(t.learner().lossScaler().skippedSteps()).isZero();
        }
    }

    @Test
    void lowPrecisionRunsLearnAndTrackFp32() throws IOException {
        int steps = 30;
        double[] fp32 = losses(Precision.FP32, steps);
        double[] bf16 = losses(Precision.of(DType.BF16), steps);
        double[] fp16 = losses(Precision.of(DType.FP16), steps);
        for (int s = 0; s < 5; s++) {
            assertThat(bf16[s]).as("bf16 loss of step %d", s).isCloseTo(fp32[s], offset(BF16_LOSS_TOL));
            assertThat(fp16[s]).as("fp16 loss of step %d", s).isCloseTo(fp32[s], offset(FP16_LOSS_TOL));
        }
        assertThat(bf16[0]).as("bf16 rounds: not the fp32 bits").isNotEqualTo(fp32[0]);
        assertThat(fp16[0]).as("fp16 rounds: not the fp32 bits").isNotEqualTo(fp32[0]);
        for (double[] l : new double[][] {fp32, bf16, fp16}) {
            assertThat(meanOfLast(l, 5)).as("the loss falls").isLessThan(l[0] - 0.3);
        }
    }

    /**
     * bf16 runs round attention's operands too ({@link Gpt2#attentionOperands}), fp16 runs keep attention fp32 (no
     * fp16 attention kernel); a backend without bf16 attention (the naive CPU kernel) keeps fp32 attention with a
     * warning, and the learner still starts.
     */
    @Test
    void bf16RoundsAttentionWhereTheBackendCanAndKeepsFp32Elsewhere() throws IOException {
        for (DType d : new DType[] {DType.FP32, DType.BF16, DType.FP16}) {
            try (Gpt2 m = Gpt2Fixtures.model(ops, 2, 1, Precision.of(d))) {
                assertThat(m.matmulOperands()).isEqualTo(d);
                assertThat(m.attentionOperands()).as("%s", d).isEqualTo(d == DType.BF16 ? DType.BF16 : DType.FP32);
            }
        }
        CpuOps naive = new CpuOps(pool, CpuOps.AttentionKernel.NAIVE);
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base(Precision.of(DType.BF16)).build(), Gpt2Fixtures.TINY,
                trainFile, null, 1, 1, b -> Gpt2Fixtures.FP32_ACTIVATIONS.apply(b).backend(r -> naive))) {
            assertThat(t.learner().network().matmulOperands()).isEqualTo(DType.BF16);
            assertThat(t.learner().network().attentionOperands()).isEqualTo(DType.FP32);
            assertThat(t.trainStep().trainLoss()).isFinite();
        }
    }

    private static double[] losses(Precision p, int steps) throws IOException {
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base(p).steps(steps).build(), trainFile, null, 1)) {
            double[] l = new double[steps];
            for (int s = 0; s < steps; s++) {
                StepMetrics sm = t.trainStep();
                assertThat(sm.skipped()).as("%s step %d", p.label(), s).isFalse();
                l[s] = sm.trainLoss();
            }
            return l;
        }
    }

    private static double meanOfLast(double[] x, int n) {
        double sum = 0;
        for (int i = x.length - n; i < x.length; i++) {
            sum += x[i];
        }
        return sum / n;
    }

    @Test
    void fp32IsBitForBitThePlainStep() throws IOException {
        // the learner's fp32 step against llm.c's step written out here: gradients of the mean loss, norm, clip,
        // AdamW at step s + 1 — any scaling left in the fp32 path would change bits
        TrainConfig cfg = Gpt2Fixtures.base().gradClip(0.5f).gradAccum(2).build();
        int B = cfg.batch(), T = cfg.seq(), K = cfg.gradAccum();
        List<Double> trainerLosses = new ArrayList<>();
        float[] trainerParams;
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 1)) {
            while (!t.done()) {
                trainerLosses.add(t.trainStep().trainLoss());
            }
            trainerParams = t.parameters();
        }
        try (Gpt2 m = Gpt2Fixtures.model(ops, B, 1); Arena arena = Arena.ofShared();
             DataLoader loader = new DataLoader(trainFile, B, T, 0, 1, cfg.dataOrder(), cfg.seed())) {
            long count = m.layout().count();
            MemorySegment mom = arena.allocate(count * 4), vel = arena.allocate(count * 4);
            MemorySegment in = arena.allocate((long) B * T * 4), tg = arena.allocate((long) B * T * 4);
            for (int s = 0; s < cfg.steps(); s++) {
                m.zeroGrad();
                double loss = 0;
                for (int k = 0; k < K; k++) {
                    loader.next(in, tg);
                    loss += m.forwardBackward(in, tg, B, T, 1f / ((float) B * T * K));
                }
                assertThat(loss / K).as("loss of step %d", s).isEqualTo(trainerLosses.get(s));
                double norm = Math.sqrt(ops.sumOfSquares(m.grads(), count));
                float clip = norm > cfg.gradClip() ? (float) (cfg.gradClip() / norm) : 1f;
                ops.adamw(m.params(), m.grads(), mom, vel, 0, count, new AdamWConfig(cfg.learningRate(s),
                        cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay()), s + 1, clip);
            }
            assertThat(Gpt2Fixtures.floats(m.params())).containsExactly(trainerParams);
        }
    }

    @Test
    void fp16ResumeIsBitIdenticalScalerIncluded() throws IOException {
        // window 2 and a scale that overflows first: the checkpoint lands mid-window, after skips
        TrainConfig cfg = base(fp16(0x1p22f, 2)).steps(16).build();
        List<StepMetrics> straight = new ArrayList<>();
        float[] finalParams;
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 3)) {
            straight.addAll(t.toEnd());
            finalParams = t.parameters();
        }
        int at = 0;
        while (straight.get(at).skipped() || straight.get(at + 1).lossScale() != straight.get(at).lossScale()) {
            at++; // the first clean step whose successor keeps its scale: one clean step into a window
        }
        int saveAfter = at + 1;
        assertThat(straight.get(0).skipped()).as("the run starts by skipping").isTrue();
        Path dir = tmp.resolve("fp16-resume");
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 3)) {
            for (int s = 0; s < saveAfter; s++) {
                t.trainStep();
            }
            t.save(dir);
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 99)) {
            t.resume(dir);
            assertThat(t.learner().lossScaler().scale()).isEqualTo(straight.get(saveAfter).lossScale());
            assertThat(t.learner().lossScaler().cleanSteps()).isEqualTo(1);
            for (int s = saveAfter; s < cfg.steps(); s++) {
                StepMetrics a = straight.get(s), b = t.trainStep();
                assertThat(b.trainLoss()).as("loss of step %d", s).isEqualTo(a.trainLoss());
                assertThat(b.lossScale()).as("scale of step %d", s).isEqualTo(a.lossScale());
                assertThat(b.skippedSteps()).as("skips by step %d", s).isEqualTo(a.skippedSteps());
            }
            assertThat(t.parameters()).containsExactly(finalParams);
        }
    }

    @Test
    void ranksAgreeOnEveryOverflowAndStayReplicas() {
        TrainConfig cfg = base(fp16(0x1p22f, 2)).steps(12).bucketBytes(0).build();
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            List<Replica> runs = g.run(comm -> {
                try (Gpt2Fixtures.Run t = Gpt2Fixtures.Run.rank(comm, cfg, Gpt2Fixtures.TINY, trainFile, null, 1,
                        Gpt2Fixtures.FP32_ACTIVATIONS)) {
                    return new Replica(t.toEnd(), t.replica());
                }
            });
            assertThat(runs.get(1).params()).as("the replicas' parameters").containsExactly(runs.get(0).params());
            List<StepMetrics> r0 = runs.get(0).steps(), r1 = runs.get(1).steps();
            assertThat(r0.getFirst().skipped()).isTrue();
            assertThat(r0.getLast().skipped()).isFalse();
            for (int s = 0; s < cfg.steps(); s++) {
                assertThat(r1.get(s).skipped()).as("step %d", s).isEqualTo(r0.get(s).skipped());
                assertThat(r1.get(s).lossScale()).isEqualTo(r0.get(s).lossScale());
            }
        }
    }

    /** A rank's steps and final parameters. */
    private record Replica(List<StepMetrics> steps, float[] params) {}
}
