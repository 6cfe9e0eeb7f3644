package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.ClassifierRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link ClassifierRef}'s gradient against finite differences, {@link FusedClassifier} against {@link ClassifierRef}
 * with the padding poisoned, determinism over thread counts, argument errors.
 */
class ClassifierTest {

    static final double U = 0x1p-24;
    /**
     * The fast kernel's loss is log(S) + max − x[t] with S = Σ exp(x − max): each exponential is off by its argument's
     * rounding (|x − max|·u ≤ 8u for logits in [−4, 4]) plus ~2u for the fp32 exp; S's fp32 lanes sum at most
     * 256/4 = 64 terms (128-bit vectors) before going to float64, adding ≤ 64u; so S is within ~74u relative, and the
     * loss within ~74u absolute, plus its fp32 rounding (u·|loss|). 128u leaves room without hiding a real error (a
     * wrong max, a skipped element, the padding read, are ≫ 1e-5).
     */
    static final double LOSS_ABS = 128 * U;
    static final double LOSS_REL = 2 * U;
    /**
     * Probabilities p = dlogit/scale + onehot: the same relative error as S and one exponential (≤ 128u), plus the
     * target's subtraction rounding (≤ 2u of |scale|, i.e. an absolute 2u on p).
     */
    static final double P_REL = 128 * U;
    static final double P_ABS = 2 * U;
    /** Finite differences in float64 agree with the analytic gradient to ~1e-7 relative (see FiniteDifferences). */
    static final double FD_REL = 1e-6;
    static final double FD_ABS = 1e-8;
    static final double RANGE = 4;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @ParameterizedTest(name = "N={0} V={1} Vp={2}")
    @CsvSource({"1,1,1", "2,1,3", "3,2,2", "2,5,8", "3,7,7", "2,13,16"})
    void referenceGradientMatchesFiniteDifferences(int N, int V, int Vp) {
        long seed = 1000L * N + 10L * V + Vp;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] logits = Buffers.uniform(rnd, N * Vp, RANGE);
        int[] targets = Buffers.ints(rnd, N, V);
        double[] losses = new double[N];
        double[] numeric = FiniteDifferences.gradient(logits,
                x -> ClassifierRef.forward(new double[N], x, targets, N, V, Vp));
        double[] analytic = logits.clone();
        double mean = ClassifierRef.forwardBackward(analytic, losses, targets, N, V, Vp, 1.0 / N);
        String what = "d mean loss / d logits, N=" + N + " V=" + V + " Vp=" + Vp + " seed=" + seed;
        Compare.close(what, analytic, numeric, FD_REL, FD_ABS);
        for (int i = 0; i < N; i++) {
            for (int j = V; j < Vp; j++) {
                assertThat(analytic[i * Vp + j]).as(what + ": padding [%d, %d]", i, j).isEqualTo(0.0);
            }
        }
        // the padding never affects the loss, whatever it holds
        double[] poisoned = logits.clone();
        for (int i = 0; i < N; i++) {
            for (int j = V; j < Vp; j++) {
                poisoned[i * Vp + j] = j % 2 == 0 ? Double.NaN : 1e30;
            }
        }
        assertThat(ClassifierRef.forward(new double[N], poisoned, targets, N, V, Vp)).as(what).isEqualTo(mean);
    }

    @ParameterizedTest(name = "N={0} V={1} Vp={2}")
    @CsvSource({"1,1,1", "5,1,4", "3,2,2", "7,7,9", "4,100,100", "9,100,131", "6,1001,1024", "5,1037,1037",
            "2,50257,50304"})
    void fastMatchesReference(int N, int V, int Vp) {
        long seed = 31L * N + 7L * V + Vp;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] logits = Buffers.uniform(rnd, N * Vp, RANGE);
        for (int i = 0; i < N; i++) {
            for (int j = V; j < Vp; j++) { // would dominate the max or the sum, or make everything NaN, if read
                logits[i * Vp + j] = switch ((i + j) % 3) {
                    case 0 -> Double.NaN;
                    case 1 -> Float.POSITIVE_INFINITY;
                    default -> 1e30;
                };
            }
        }
        int[] targets = Buffers.ints(rnd, N, V);
        float scale = (float) (rnd.nextBoolean() ? 1.0 / N : -0.37);
        matchesReference(POOLS.three(), logits, targets, N, V, Vp, scale, "N=" + N + " V=" + V + " Vp=" + Vp
                + " seed=" + seed);
    }

    /**
     * GPT-2-sized rows go several to a task, each row's max taken in the previous row's exponential pass. Rows here
     * are shifted by 0, +150, −150, +300, … so that any row's max used for another row would overflow its
     * exponentials or flush them to zero. The logits are fp32 values, so the shifted rows reach the reference exactly,
     * and {@code x − max} stays exact within a shifted row (Sterbenz), which keeps the tolerances above.
     */
    @Test
    void rowsOfDifferentScalesEachUseTheirOwnMax() {
        int N = 25, V = 33001, Vp = 33024; // 6 rows a task on one thread, 2 on three
        long seed = 2026;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] logits = Buffers.uniform(rnd, N * Vp, RANGE);
        for (int i = 0; i < N; i++) {
            double shift = 150.0 * ((i + 1) / 2) * (i % 2 == 0 ? -1 : 1);
            for (int j = 0; j < Vp; j++) {
                logits[i * Vp + j] = (float) (logits[i * Vp + j] + shift);
            }
        }
        int[] targets = Buffers.ints(rnd, N, V);
        for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
            matchesReference(pool, logits, targets, N, V, Vp, 1f / N,
                    "rows shifted by ±150k, N=" + N + " V=" + V + " seed=" + seed + ", " + pool.threads() + " threads");
        }
    }

    /** Forward and forwardBackward on {@code pool} against {@link ClassifierRef} in float64. */
    private static void matchesReference(Parallel pool, double[] logits, int[] targets, int N, int V, int Vp,
                                         float scale, String what) {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment x = Buffers.floats(arena, logits);
            MemorySegment t = Buffers.ints(arena, targets);
            MemorySegment losses = Buffers.poisoned(arena, N);
            double[] refLosses = new double[N];
            double refMean = ClassifierRef.forward(refLosses, logits, targets, N, V, Vp);

            double mean = FusedClassifier.forward(pool, losses, x, t, N, V, Vp);
            Compare.close("forward losses, " + what, Buffers.read(losses, N), refLosses, LOSS_REL, LOSS_ABS);
            assertThat(Math.abs(mean - refMean)).as("forward mean, " + what)
                    .isLessThanOrEqualTo(LOSS_ABS + LOSS_REL * Math.abs(refMean));
            assertThat(x.asByteBuffer()).as("forward must not write the logits, " + what)
                    .isEqualTo(Buffers.floats(arena, logits).asByteBuffer());

            Buffers.poison(losses);
            mean = FusedClassifier.forwardBackward(pool, x, losses, t, N, V, Vp, scale);
            Compare.close("forwardBackward losses, " + what, Buffers.read(losses, N), refLosses, LOSS_REL, LOSS_ABS);
            assertThat(Math.abs(mean - refMean)).as("forwardBackward mean, " + what)
                    .isLessThanOrEqualTo(LOSS_ABS + LOSS_REL * Math.abs(refMean));

            double[] ref = logits.clone();
            ClassifierRef.forwardBackward(ref, new double[N], targets, N, V, Vp, scale);
            double[] got = Buffers.read(x, N * Vp);
            double[] pGot = new double[N * V], pRef = new double[N * V];
            for (int i = 0; i < N; i++) {
                for (int j = 0; j < V; j++) {
                    double onehot = j == targets[i] ? 1 : 0;
                    pGot[i * V + j] = got[i * Vp + j] / scale + onehot;
                    pRef[i * V + j] = ref[i * Vp + j] / scale + onehot;
                }
                for (int j = V; j < Vp; j++) {
                    assertThat(got[i * Vp + j]).as("padding dlogits[%d, %d], %s", i, j, what).isEqualTo(0.0);
                }
            }
            Compare.close("dlogits/scale + onehot, scale " + scale + ", " + what, pGot, pRef, P_REL, P_ABS);
        }
    }

    /**
     * Small rows go 32 to a task on any pool; GPT-2-sized rows (Vp ≥ 2¹⁵) go in runs of N/(4·threads), 3 rows a task
     * on one thread and 1 on three here, so a row's max comes from its own pass or from the previous row's: the bits
     * must not change.
     */
    @ParameterizedTest
    @CsvSource({"37, 1001, 1008", "13, 32771, 32784"})
    void resultsDoNotDependOnTheThreadCount(int N, int V, int Vp) {
        SplittableRandom rnd = new SplittableRandom(42);
        double[] logits = Buffers.uniform(rnd, N * Vp, RANGE);
        int[] targets = Buffers.ints(rnd, N, V);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment t = Buffers.ints(arena, targets);
            byte[][] runs = new byte[4][];
            double[] means = new double[4];
            for (int r = 0; r < 4; r++) {
                MemorySegment x = Buffers.floats(arena, logits);
                MemorySegment losses = Buffers.poisoned(arena, N);
                means[r] = FusedClassifier.forwardBackward(r % 2 == 0 ? POOLS.one() : POOLS.three(), x, losses, t, N, V, Vp,
                        1f / N);
                byte[] l = losses.toArray(ValueLayout.JAVA_BYTE), d = x.toArray(ValueLayout.JAVA_BYTE);
                runs[r] = new byte[l.length + d.length];
                System.arraycopy(l, 0, runs[r], 0, l.length);
                System.arraycopy(d, 0, runs[r], l.length, d.length);
            }
            for (int r = 1; r < 4; r++) {
                assertThat(means[r]).as("mean, run %d (seed 42)", r).isEqualTo(means[0]);
                assertThat(runs[r]).as("losses and dlogits, run %d (seed 42)", r).isEqualTo(runs[0]);
            }
        }
    }

    @Test
    void argumentErrors() {
        int N = 3, V = 10, Vp = 12;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment x = arena.allocate((long) N * Vp * 4);
            MemorySegment losses = arena.allocate(N * 4L);
            MemorySegment t = Buffers.ints(arena, new int[] {0, 9, 3});
            MemorySegment bad = Buffers.ints(arena, new int[] {0, 10, 3});
            MemorySegment negative = Buffers.ints(arena, new int[] {0, 1, -1});
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses, x, bad, N, V, Vp))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets[1] = 10");
            assertThatThrownBy(() -> FusedClassifier.forwardBackward(POOLS.one(), x, losses, negative, N, V, Vp, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets[2] = -1");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses, x.asSlice(0, 4L * N * Vp - 4), t, N,
                    V, Vp)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("logits");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses.asSlice(0, 8), x, t, N, V, Vp))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("losses");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses, x, t.asSlice(0, 8), N, V, Vp))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses, x, t, N, V, V - 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Vp");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), losses, x, t, 0, V, Vp))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("N");
            assertThatThrownBy(() -> FusedClassifier.forwardBackward(POOLS.one(), x, losses, t, N, V, Vp, Float.NaN))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dlossScale");
            assertThatThrownBy(() -> FusedClassifier.forward(POOLS.one(), x.asSlice(8), x, t, N, V, Vp))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment c = confined.allocate((long) N * Vp * 4);
                assertThatThrownBy(() -> FusedClassifier.forward(POOLS.three(), losses, c, t, N, V, Vp))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("logits");
            }
        }
    }
}
