package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.AttentionRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attention: the float64 reference's backward against finite differences, then {@link NaiveAttention} and
 * {@link FlashAttention} against the reference (forward outputs poisoned, backward accumulating into random
 * prefill), against each other at T = 1024, across thread counts, and their argument checks.
 *
 * <p>Tolerances. A score {@code s = scale·q·k} is an hs-term fp32 dot product, off by about √hs·u·scale·|q||k|
 * typically (u = 2⁻²⁴; the worst case hs·u·… never happens with random data); with |q|,|k| ≤ 3 and hs ≤ 64 that
 * is ≲ 1e-6·|s|-scale, and p = exp(s − lse) inherits it as a relative error. The output then sums up to T terms
 * of p·v (recursive fp32 sum: ~√T·u relative to max|v| typically, T·u at worst) and the gradients chain four
 * such products with one cancellation ({@code dp − D}). Measured maxima for T ≤ 513 (both kernels, 256-bit
 * vectors) are 1.4e-6 of max|v| for out, 4e-7·(1 + |lse|) for lse and 9e-7 of max|grad| for the gradients; the
 * bounds below leave a 7–11× margin, tight enough that a wrong mask, a missed rescale or a dropped block (errors
 * of order 1e-1) fail.
 */
class AttentionTest {

    /** |out − ref| ≤ OUT_TOL·max|v| + OUT_TOL·|ref|: see the class comment. */
    static final double OUT_TOL = 1e-5;
    /** |lse − ref| ≤ LSE_TOL·(1 + |ref|): lse is a score plus a log, so its error is the scores' error. */
    static final double LSE_TOL = 3e-6;
    /** |dqkv − ref| ≤ GRAD_TOL·max|grad| + U_PREFILL·|ref|: the gradient scale, plus the prefill's rounding. */
    static final double GRAD_TOL = 1e-5;
    static final double U_PREFILL = 1e-6;
    /** Finite differences in float64 agree with analytic gradients to ~1e-7 (see {@link FiniteDifferences}). */
    static final double FD_TOL = 1e-6;
    /** Range of the random qkv values: scores of a few units, so the softmax is neither flat nor one-hot. */
    static final double RANGE = 3;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    enum Kernel {
        NAIVE, FLASH;

        void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C,
                     int NH) {
            if (this == NAIVE) {
                NaiveAttention.forward(pool, out, lse, qkv, B, T, C, NH);
            } else {
                FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH);
            }
        }

        void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                      MemorySegment lse, int B, int T, int C, int NH) {
            if (this == NAIVE) {
                NaiveAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
            } else {
                FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
            }
        }
    }

    // ---------------------------------------------------------------- the reference against finite differences

    @ParameterizedTest(name = "B={0} T={1} C={2} NH={3}")
    @CsvSource({"1,5,6,2", "2,7,5,1", "1,9,12,3", "1,4,4,4"})
    void referenceBackwardMatchesFiniteDifferences(int B, int T, int C, int NH) {
        long seed = 1000L * T + C;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] qkv = Buffers.uniform(rnd, B * T * 3 * C, 1.5);
        double[] dout = Buffers.uniform(rnd, B * T * C, 1);
        double[] out = new double[B * T * C];
        double[] lse = new double[B * NH * T];
        AttentionRef.forward(out, lse, qkv, B, T, C, NH);

        double[] expectedLse = naiveLse(qkv, B, T, C, NH);
        Compare.close("lse, seed " + seed, lse, expectedLse, FD_TOL, FD_TOL);

        double[] dqkv = new double[qkv.length];
        AttentionRef.backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        double[] numeric = FiniteDifferences.gradient(qkv, x -> {
            double[] o = new double[B * T * C];
            AttentionRef.forward(o, new double[B * NH * T], x, B, T, C, NH);
            return FiniteDifferences.dot(dout, o);
        });
        Compare.close("dqkv vs finite differences, seed " + seed, dqkv, numeric, FD_TOL,
                FD_TOL * Compare.maxAbs(numeric));
        assertThat(Compare.maxAbs(dqkv)).as("gradient is not trivially zero").isGreaterThan(1e-3);
    }

    /** {@code log Σ_{u≤t} exp(scale·q_t·k_u)} without the max shift (the test's values are small). */
    static double[] naiveLse(double[] qkv, int B, int T, int C, int NH) {
        int hs = C / NH;
        double[] lse = new double[B * NH * T];
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    double sum = 0;
                    for (int u = 0; u <= t; u++) {
                        double dot = 0;
                        for (int i = 0; i < hs; i++) {
                            dot += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + u) * 3 * C + C + h * hs + i];
                        }
                        sum += Math.exp(dot / Math.sqrt(hs));
                    }
                    lse[(b * NH + h) * T + t] = Math.log(sum);
                }
            }
        }
        return lse;
    }

    // ---------------------------------------------------------------- the fp32 kernels against the reference

    /**
     * Fixed shapes (T around and across the flash block of 64 and its groups of 4 blocks, hs 3, 5, 10, 16, 64 and 80,
     * more than one block of 64 columns) and seeded random ones.
     */
    static Stream<Arguments> shapes() {
        List<int[]> s = new ArrayList<>(List.of(
                new int[] {1, 1, 3, 1}, new int[] {2, 2, 10, 2}, new int[] {1, 37, 48, 3}, new int[] {2, 67, 128, 2},
                new int[] {1, 130, 20, 4}, new int[] {1, 64, 64, 1}, new int[] {1, 65, 64, 1},
                new int[] {1, 200, 256, 4}, new int[] {1, 333, 20, 2}, new int[] {1, 300, 80, 1}));
        SplittableRandom rnd = new SplittableRandom(7);
        int[] headSizes = {3, 5, 16, 64};
        for (int i = 0; i < 6; i++) {
            int nh = 1 + rnd.nextInt(4);
            s.add(new int[] {1 + rnd.nextInt(2), 1 + rnd.nextInt(150), nh * headSizes[rnd.nextInt(4)], nh});
        }
        List<Arguments> args = new ArrayList<>();
        for (Kernel k : Kernel.values()) {
            for (int[] x : s) {
                args.add(Arguments.of(k, x[0], x[1], x[2], x[3]));
            }
        }
        return args.stream();
    }

    @ParameterizedTest(name = "{0} B={1} T={2} C={3} NH={4}")
    @MethodSource("shapes")
    void kernelMatchesReference(Kernel kernel, int B, int T, int C, int NH) {
        long seed = 31L * B + 7L * T + C + 1000L * NH;
        SplittableRandom rnd = new SplittableRandom(seed);
        String what = kernel + " B=" + B + " T=" + T + " C=" + C + " NH=" + NH + " seed " + seed;
        double[] qkv = Buffers.uniform(rnd, B * T * 3 * C, RANGE);
        double[] dout = Buffers.uniform(rnd, B * T * C, 1);
        double[] prefill = Buffers.uniform(rnd, qkv.length, 1);
        double[] outRef = new double[B * T * C];
        double[] lseRef = new double[B * NH * T];
        AttentionRef.forward(outRef, lseRef, qkv, B, T, C, NH);
        double[] grad = new double[qkv.length];
        AttentionRef.backward(grad, dout, qkv, outRef, lseRef, B, T, C, NH);
        double[] expected = prefill.clone();
        for (int i = 0; i < expected.length; i++) {
            expected[i] += grad[i];
        }
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sQkv = Buffers.floats(arena, qkv);
            MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
            MemorySegment lse = Buffers.poisoned(arena, (long) B * NH * T);
            kernel.forward(POOLS.three(), out, lse, sQkv, B, T, C, NH);
            Compare.close("out, " + what, Buffers.read(out, outRef.length), outRef, OUT_TOL,
                    OUT_TOL * RANGE);
            Compare.close("lse, " + what, Buffers.read(lse, lseRef.length), lseRef, LSE_TOL, LSE_TOL);

            MemorySegment dqkv = Buffers.floats(arena, prefill);
            kernel.backward(POOLS.three(), dqkv, Buffers.floats(arena, dout), sQkv, out, lse, B, T, C, NH);
            Compare.close("dqkv, " + what, Buffers.read(dqkv, qkv.length), expected, U_PREFILL,
                    GRAD_TOL * Compare.maxAbs(grad));
        }
    }

    // ---------------------------------------------------------------- flash against naive, long sequence

    @Test
    void flashMatchesNaiveAtT1024() {
        int B = 1, T = 1024, NH = 2, C = 128;
        long seed = 1024;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] qkv = Buffers.uniform(rnd, B * T * 3 * C, RANGE);
        double[] dout = Buffers.uniform(rnd, B * T * C, 1);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sQkv = Buffers.floats(arena, qkv);
            MemorySegment sDout = Buffers.floats(arena, dout);
            double[][] naive = run(Kernel.NAIVE, arena, sQkv, sDout, B, T, C, NH);
            double[][] flash = run(Kernel.FLASH, arena, sQkv, sDout, B, T, C, NH);
            String what = "T=1024 hs=64 seed " + seed;
            Compare.close("out, " + what, flash[0], naive[0], OUT_TOL, OUT_TOL * RANGE);
            Compare.close("lse, " + what, flash[1], naive[1], LSE_TOL, LSE_TOL);
            Compare.close("dqkv, " + what, flash[2], naive[2], GRAD_TOL, GRAD_TOL * Compare.maxAbs(naive[2]));
        }
    }

    /** Forward then backward (into zeros) on 3 threads; returns out, lse, dqkv. */
    static double[][] run(Kernel kernel, Arena arena, MemorySegment qkv, MemorySegment dout, int B, int T, int C,
                          int NH) {
        return run(kernel, POOLS.three(), arena, qkv, dout, B, T, C, NH);
    }

    static double[][] run(Kernel kernel, Parallel pool, Arena arena, MemorySegment qkv, MemorySegment dout,
                          int B, int T, int C, int NH) {
        MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
        MemorySegment lse = Buffers.poisoned(arena, (long) B * NH * T);
        MemorySegment dqkv = arena.allocate(qkv.byteSize(), 64);
        kernel.forward(pool, out, lse, qkv, B, T, C, NH);
        kernel.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
        return new double[][] {
                Buffers.read(out, B * T * C), Buffers.read(lse, B * NH * T), Buffers.read(dqkv, B * T * 3 * C)};
    }

    // ---------------------------------------------------------------- determinism

    /**
     * Work is split over heads and query blocks, never inside a sum, so 1 and 3 threads give the same bits. The
     * kernels also avoid {@code reduceLanes} and the Vector API's EXP, whose last bits differ between the
     * interpreter's Java fallbacks and C2's code, so even this first, partly interpreted call must agree.
     */
    @ParameterizedTest
    @EnumSource(Kernel.class)
    void sameBitsOnOneAndThreeThreads(Kernel kernel) {
        int B = 2, T = 150, C = 48, NH = 3;
        SplittableRandom rnd = new SplittableRandom(99);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment qkv = Buffers.floats(arena, Buffers.uniform(rnd, B * T * 3 * C, RANGE));
            MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, B * T * C, 1));
            for (int round = 0; round < 2; round++) {
                double[][] one = run(kernel, POOLS.one(), arena, qkv, dout, B, T, C, NH);
                double[][] three = run(kernel, POOLS.three(), arena, qkv, dout, B, T, C, NH);
                for (int i = 0; i < 3; i++) {
                    assertThat(three[i]).as(kernel + " output " + i + " on 3 threads vs 1, round " + round)
                            .containsExactly(one[i]);
                }
            }
        }
    }

    // ---------------------------------------------------------------- exp

    /** The kernels' exp: within 2 ulp of Math.exp for normal results, exact 0 at −∞, NaN kept, vector = scalar bits. */
    @Test
    void expIsAccurateAndTheSameInEveryLane() {
        double worstUlps = 0;
        for (float x = -87f; x <= 1f; x += 0.000731f) {
            double ulps = Math.abs(Softmax.exp(x) - Math.exp(x)) / Math.ulp((float) Math.exp(x));
            worstUlps = Math.max(worstUlps, ulps);
        }
        assertThat(worstUlps).as("worst error in ulp over [-87, 1]").isLessThanOrEqualTo(2.0);
        for (float x = -100f; x < -87f; x += 0.001f) { // subnormal results, flushed to 0 below about −87.7
            assertThat(Math.abs(Softmax.exp(x) - Math.exp(x))).as("exp(%s)", x).isLessThan(0x1p-126);
        }
        assertThat(Softmax.exp(Float.NEGATIVE_INFINITY)).isEqualTo(0f);
        assertThat(Softmax.exp(-100f)).isEqualTo(0f);
        assertThat(Softmax.exp(0f)).isEqualTo(1f);
        assertThat(Softmax.exp(Float.NaN)).isNaN();

        SplittableRandom rnd = new SplittableRandom(3);
        int n = 1000;
        float[] x = new float[n];
        float[] expected = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) (rnd.nextDouble() * -30);
            expected[i] = Softmax.exp(x[i] - 0.5f);
        }
        x[17] = Float.NEGATIVE_INFINITY;
        expected[17] = 0f;
        float sum = Softmax.expRow(x, 0, n, 0.5f, new float[io.accel4j.cpu.Simd.lanes()]);
        assertThat(x).as("vector lanes vs scalar exp").containsExactly(expected);
        double exact = 0;
        for (float e : expected) {
            exact += e;
        }
        assertThat((double) sum).isCloseTo(exact, org.assertj.core.data.Offset.offset(1e-5 * exact));
    }

    // ---------------------------------------------------------------- argument checks

    @ParameterizedTest
    @EnumSource(Kernel.class)
    void rejectsBadArguments(Kernel kernel) {
        int B = 1, T = 4, C = 6, NH = 2;
        try (Arena arena = Arena.ofShared(); Arena confined = Arena.ofConfined()) {
            MemorySegment qkv = arena.allocate((long) B * T * 3 * C * Float.BYTES);
            MemorySegment out = arena.allocate((long) B * T * C * Float.BYTES);
            MemorySegment lse = arena.allocate((long) B * NH * T * Float.BYTES);
            MemorySegment dqkv = arena.allocate(qkv.byteSize());
            assertThatThrownBy(() -> kernel.forward(POOLS.one(), out, lse, qkv, B, T, C, 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("divisible by NH");
            assertThatThrownBy(() -> kernel.forward(POOLS.one(), out, lse, qkv.asSlice(4), B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("qkv holds 71 floats, 72");
            assertThatThrownBy(() -> kernel.forward(POOLS.one(), out, lse.asSlice(4), qkv, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lse holds 7");
            assertThatThrownBy(() -> kernel.forward(POOLS.one(), out, lse, qkv, B, 0, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("T must be >= 1");
            assertThatThrownBy(() -> kernel.forward(POOLS.one(), qkv, lse, qkv, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out overlaps qkv");
            MemorySegment local = confined.allocate(out.byteSize());
            assertThatThrownBy(() -> kernel.forward(POOLS.three(), local, lse, qkv, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out belongs to a confined");
            assertThatThrownBy(() -> kernel.backward(POOLS.one(), dqkv.asSlice(4), out, qkv, out, lse, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dqkv holds 71 floats");
            assertThatThrownBy(() -> kernel.backward(POOLS.one(), dqkv, out.asSlice(8), qkv, out, lse, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dout holds 22 floats");
            assertThatThrownBy(() -> kernel.backward(POOLS.one(), qkv, out, qkv, out, lse, B, T, C, NH))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dqkv overlaps qkv");
        }
    }
}
