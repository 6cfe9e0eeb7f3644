package io.accel4j.train;

import io.accel4j.train.precision.Precision;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.PendingAmaxes;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * FP8 training on a backend that defers its amaxes until {@code flushAmaxes()}, as the GPU's does, built on the CPU:
 * {@link Deferring} runs CpuOps' FP8 matmuls on stand-in histories cast with the real histories' scales and hands the
 * amaxes over only when flushed. The GPT-2 learner {@code accel4j train} builds ({@link Gpt2Fixtures}: validation,
 * gradient accumulation, a checkpoint, a resume) must then give bit for bit what CpuOps recording at the call gives:
 * losses, scales and checkpoint files — so the learner's FP8 state flushes the backend before every update,
 * validation restore and save.
 */
class DeferredAmaxTrainingTest {

    private static final DelayedScaling RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
            DelayedScaling.Algorithm.MAX);
    private static final int STEPS = 8, SAVED_AT = 4;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps cpu;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        Random r = new Random(31);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, r);
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 100, r);
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
        pool.close();
    }

    /**
     * An {@link Ops} over CpuOps whose FP8 matmuls record nothing at the call: each cast's amax (read from a stand-in
     * history that had the real one's scale) waits in a queue until {@code flushAmaxes()}.
     */
    private static final class Deferring {
        final PendingAmaxes pending = new PendingAmaxes();
        final Ops ops = (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("flushAmaxes")) {
                        pending.flush();
                        return null;
                    }
                    Object[] real = args == null ? null : args.clone();
                    Fp8Scaling fp8 = null, standIn = null;
                    if (real != null && real[real.length - 1] instanceof Fp8Scaling s) {
                        fp8 = s;
                        standIn = new Fp8Scaling(standIn(s.input()), standIn(s.weight()), standIn(s.gradOutput()));
                        real[real.length - 1] = standIn;
                    }
                    Object result;
                    try {
                        result = method.invoke(cpu, real);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (fp8 != null) {
                        queue(fp8.input(), standIn.input());
                        queue(fp8.weight(), standIn.weight());
                        queue(fp8.gradOutput(), standIn.gradOutput());
                    }
                    return result;
                });

        /** A one-step history of {@code h}'s format holding {@code h}'s scale and no amax. */
        private static AmaxHistory standIn(AmaxHistory h) {
            AmaxHistory s = new AmaxHistory(h.format(), 1, 0, DelayedScaling.Algorithm.MAX);
            s.restore(h.scale(), new float[1]);
            return s;
        }

        private void queue(AmaxHistory real, AmaxHistory standIn) {
            float a = standIn.amaxes()[0];
            if (a > 0) { // cast in this call
                pending.add(real, a);
            }
        }
    }

    private static TrainConfig config() {
        return Gpt2Fixtures.base().steps(STEPS).gradAccum(2).valEvery(3).valBatches(2)
                .dataOrder(SampleOrder.Mode.SHUFFLED).seed(5).precision(Precision.fp8(RECIPE)).build();
    }

    /** A run of {@code ops} to the end (from {@code resume} when not null), checkpointing into {@code save}. */
    private static List<StepMetrics> train(Ops ops, Path save, Path resume, byte[][] finalFp8) throws IOException {
        List<StepMetrics> steps = new ArrayList<>();
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(config(), Gpt2Fixtures.TINY, trainFile, valFile,
                resume == null ? 3 : 77, 1, b -> b.backend(r -> ops))) {
            if (resume != null) {
                t.resume(resume);
            }
            while (!t.done()) {
                steps.add(t.trainStep());
                if (save != null && t.step() == SAVED_AT) {
                    t.save(save);
                }
            }
            finalFp8[0] = t.learner().fp8State();
        }
        return steps;
    }

    @Test
    void deferredAmaxesTrainBitForBitAsRecordedOnes() throws IOException {
        Path atCall = tmp.resolve("at-call"), deferredDir = tmp.resolve("deferred");
        byte[][] expectedFp8 = new byte[1][], actualFp8 = new byte[1][], resumedFp8 = new byte[1][];
        List<StepMetrics> expected = train(cpu, atCall, null, expectedFp8);
        Deferring d = new Deferring();
        List<StepMetrics> actual = train(d.ops, deferredDir, null, actualFp8);

        assertThat(d.pending.added()).as("amaxes deferred").isGreaterThan(STEPS * 2 * 4 * 3);
        assertThat(d.pending.flushes()).as("flushed at least once a step").isGreaterThanOrEqualTo(STEPS);
        assertSameBits(actual, expected);
        assertThat(expected.getFirst().valLoss()).as("validation ran").isFinite();
        assertThat(actualFp8[0]).as("final amax histories and scales").containsExactly(expectedFp8[0]);
        String state = String.format("state_%08d.bin", SAVED_AT);
        assertThat(Files.readAllBytes(deferredDir.resolve(state))).as("the checkpoint's state, FP8 histories included")
                .isEqualTo(Files.readAllBytes(atCall.resolve(state)));

        List<StepMetrics> resumed = train(new Deferring().ops, null, deferredDir, resumedFp8);
        assertSameBits(resumed, expected.subList(SAVED_AT, STEPS));
        assertThat(resumedFp8[0]).as("resumed: final histories").containsExactly(expectedFp8[0]);
    }

    private static void assertSameBits(List<StepMetrics> actual, List<StepMetrics> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            StepMetrics a = actual.get(i), e = expected.get(i);
            assertThat(a.step()).isEqualTo(e.step());
            for (double[] pair : new double[][] {{a.trainLoss(), e.trainLoss()}, {a.valLoss(), e.valLoss()},
                {a.gradNorm(), e.gradNorm()}}) {
                assertThat(Double.doubleToRawLongBits(pair[0])).as("step %d: %s vs %s", e.step(), pair[0], pair[1])
                        .isEqualTo(Double.doubleToRawLongBits(pair[1]));
            }
        }
    }
}
