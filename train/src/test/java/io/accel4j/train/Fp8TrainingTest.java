package io.accel4j.train;

import io.accel4j.train.precision.Precision;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Training with {@code --precision fp8} ({@link Precision#fp8}) on the test model (the GPT-2 learner
 * {@code accel4j train} builds, {@link Gpt2Fixtures}): the blocks' scales follow their amaxes step by step (delayed:
 * a step casts with the scales of the steps before it), the run learns and is not fp32's, the FP8 state survives a
 * checkpoint bit for bit, ranks cast with the same scales and stay replicas, and a checkpoint of another precision
 * or FP8 recipe is a clear error. The loss against fp32 on the default model is TrainCommandTest's.
 */
class Fp8TrainingTest {

    /** A short history so that amaxes also leave the window within the run. */
    private static final DelayedScaling RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
            DelayedScaling.Algorithm.MAX);

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

    private static TrainConfig.Builder base() {
        return Gpt2Fixtures.base().precision(Precision.fp8(RECIPE));
    }

    @Test
    void theScalesFollowTheAmaxesOfEarlierSteps() {
        int B = 2, T = 5;
        Random rnd = new Random(5);
        try (Gpt2 m = Gpt2Fixtures.model(ops, B, 1, Precision.fp8(RECIPE)); Arena arena = Arena.ofShared()) {
            Fp8State fp8 = m.fp8();
            MemorySegment in = arena.allocate(4L * B * T), tg = arena.allocate(4L * B * T);
            List<float[]> amaxes = new ArrayList<>();
            for (int s = 0; s < 5; s++) {
                for (int i = 0; i < B * T; i++) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, rnd.nextInt(Gpt2Fixtures.TINY.V()));
                    tg.setAtIndex(ValueLayout.JAVA_INT, i, rnd.nextInt(Gpt2Fixtures.TINY.V()));
                }
                float[] before = scales(fp8);
                m.zeroGrad();
                m.forwardBackward(in, tg, B, T, 1f / (B * T));
                float[] seen = fp8.stepAmaxes();
                assertThat(scales(fp8)).as("the casts of step %d do not move the scales", s).containsExactly(before);
                for (int i = 0; i < seen.length; i++) {
                    assertThat(seen[i]).as("tensor %d was cast in step %d", i, s).isPositive();
                }
                amaxes.add(seen);
                fp8.update();
                float[] after = scales(fp8);
                for (int i = 0; i < seen.length; i++) {
                    float max = 0;
                    for (int k = Math.max(0, amaxes.size() - RECIPE.historyLength()); k < amaxes.size(); k++) {
                        max = Math.max(max, amaxes.get(k)[i]);
                    }
                    float fmax = i % 3 == 2 ? 57344f : 448f; // input, weight E4M3; gradOutput E5M2
                    assertThat(after[i]).as("scale %d after step %d: fp8 max / max of the last 3 amaxes", i, s)
                            .isEqualTo(fmax / max);
                }
            }
        }
    }

    @Test
    void fp8LearnsAndIsNotFp32() {
        int steps = 30;
        double[] fp32 = losses(Gpt2Fixtures.base().steps(steps).build());
        double[] fp8 = losses(base().steps(steps).build());
        assertThat(fp8[0]).as("step 0: the forward's E4M3 rounding").isNotEqualTo(fp32[0]);
        for (double[] l : new double[][] {fp32, fp8}) {
            assertThat(mean(l, steps - 5)).as("the loss falls").isLessThan(l[0] - 0.3);
        }
    }

    private static double[] losses(TrainConfig cfg) {
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 1)) {
            double[] l = new double[cfg.steps()];
            for (int s = 0; s < l.length; s++) {
                l[s] = t.trainStep().trainLoss();
            }
            return l;
        }
    }

    @Test
    void validationLeavesTheScalesAlone() {
        TrainConfig quiet = base().steps(8).build(), validating = base().steps(8).valEvery(2).valBatches(2).build();
        try (Gpt2Fixtures.Run ta = new Gpt2Fixtures.Run(quiet, trainFile, null, 4);
             Gpt2Fixtures.Run tb = new Gpt2Fixtures.Run(validating, trainFile, trainFile, 4)) {
            int validated = 0;
            for (int s = 0; s < quiet.steps(); s++) {
                double la = ta.trainStep().trainLoss();
                StepMetrics mb = tb.trainStep();
                validated += Double.isNaN(mb.valLoss()) ? 0 : 1;
                assertThat(mb.trainLoss()).as("loss of step %d", s).isEqualTo(la);
            }
            assertThat(validated).isGreaterThanOrEqualTo(3);
            assertThat(tb.learner().fp8State()).containsExactly(ta.learner().fp8State());
        }
    }

    @Test
    void resumeIsBitIdenticalScalesIncluded() throws IOException {
        TrainConfig cfg = base().steps(12).gradAccum(2).build();
        List<Double> straight = new ArrayList<>();
        float[] finalParams;
        byte[] finalFp8;
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 3)) {
            while (!t.done()) {
                straight.add(t.trainStep().trainLoss());
            }
            finalParams = t.parameters();
            finalFp8 = t.learner().fp8State();
        }
        Path dir = tmp.resolve("fp8-resume");
        int saveAfter = 5; // the window (3 steps) is full and has moved on: the checkpoint must carry it
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 3)) {
            for (int s = 0; s < saveAfter; s++) {
                t.trainStep();
            }
            t.save(dir);
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 99)) {
            t.resume(dir);
            for (int s = saveAfter; s < cfg.steps(); s++) {
                assertThat(t.trainStep().trainLoss()).as("loss of step %d", s).isEqualTo(straight.get(s));
            }
            assertThat(t.parameters()).containsExactly(finalParams);
            assertThat(t.learner().fp8State()).as("amax histories and scales").containsExactly(finalFp8);
        }
        // without the FP8 state the resumed run would cast step 5 with scale 1: not the same losses
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 99)) {
            t.resume(dir);
            t.learner().restoreFp8State(new Fp8State(RECIPE, Gpt2Fixtures.TINY.L()).encode()); // fresh histories
            assertThat(t.trainStep().trainLoss()).isNotEqualTo(straight.get(saveAfter));
        }
    }

    @Test
    void aCheckpointOfAnotherPrecisionOrRecipeIsAClearError() throws IOException {
        Path fp8Dir = tmp.resolve("fp8-ckpt"), fp32Dir = tmp.resolve("fp32-ckpt");
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), trainFile, null, 3)) {
            t.trainStep();
            t.save(fp8Dir);
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(Gpt2Fixtures.base().build(), trainFile, null, 3)) {
            t.trainStep();
            t.save(fp32Dir);
            assertThatThrownBy(() -> t.resume(fp8Dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[18] (FP8 state bytes)").hasMessageContaining("does not run FP8");
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), trainFile, null, 3)) {
            assertThatThrownBy(() -> t.resume(fp32Dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[18] (FP8 state bytes)")
                    .hasMessageContaining("is 0 bytes, but this learner runs FP8");
        }
        DelayedScaling longer = new DelayedScaling(DelayedScaling.Format.HYBRID, 16, 0, DelayedScaling.Algorithm.MAX);
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(Gpt2Fixtures.base().precision(Precision.fp8(longer)).build(),
                trainFile, null, 3)) {
            assertThatThrownBy(() -> t.resume(fp8Dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("amax history length (--fp8-history) 3, this run 16");
        }
    }

    @ParameterizedTest(name = "ZeRO stage {0}")
    @ValueSource(ints = {0, 3})
    void ranksCastWithTheSameScalesAndStayReplicas(int zeroStage) {
        TrainConfig cfg = base().steps(6).bucketBytes(0).zeroStage(zeroStage).build();
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            List<Object[]> states = g.run(comm -> {
                try (Gpt2Fixtures.Run t = Gpt2Fixtures.Run.rank(comm, cfg, Gpt2Fixtures.TINY, trainFile, null, 1,
                        b -> b)) {
                    t.toEnd();
                    // ZeRO-3's ranks hold shards, not replicas
                    return new Object[] {t.learner().fp8State(), zeroStage < 3 ? t.replica() : null};
                }
            });
            assertThat((byte[]) states.get(1)[0]).as("the ranks' amaxes are reduced to their max")
                    .containsExactly((byte[]) states.get(0)[0]);
            if (zeroStage < 3) {
                assertThat((float[]) states.get(1)[1]).as("the replicas' parameters")
                        .containsExactly((float[]) states.get(0)[1]);
            }
        }
    }

    /** Every history's current scale, in {@link Fp8State#stepAmaxes}' order. */
    private static float[] scales(Fp8State fp8) {
        float[] s = new float[fp8.histories()];
        int i = 0;
        for (int l = 0; l < fp8.layers(); l++) {
            for (Fp8State.Linear which : Fp8State.Linear.values()) {
                var x = fp8.linear(l, which);
                s[i++] = x.input().scale();
                s[i++] = x.weight().scale();
                s[i++] = x.gradOutput().scale();
            }
        }
        return s;
    }

    private static double mean(double[] x, int from) {
        double sum = 0;
        for (int i = from; i < x.length; i++) {
            sum += x[i];
        }
        return sum / (x.length - from);
    }
}
