package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.ref.ReductionsRef;
import io.accel4j.cpu.testing.Buffers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link Reductions} against {@link ReductionsRef}, with non-finite values injected, and over thread counts. */
class ReductionsTest {

    static final double U = 0x1p-24;
    /**
     * sumOfSquares sums at most k = BLOCK/(4·lanes) + 3 ≤ 35 squares (128-bit vectors) per fp32 lane, one fma
     * rounding each, before widening to float64; all terms are ≥ 0, so the error is ≤ 35u·Σx², plus float64 rounding
     * (n·2⁻⁵³·Σx², below 4e-10 relative here). 36u.
     */
    static final double SUM_REL = 36 * U;
    static final int LARGE = 3_000_007;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @ParameterizedTest(name = "n={0}")
    @ValueSource(ints = {0, 1, 2, 7, 33, 1001, 65536, 131085, LARGE})
    void fastMatchesReference(int n) {
        long seed = 17L * n + 1;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] x = Buffers.uniform(rnd, n, 3);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = Buffers.floats(arena, x);
            String what = "n=" + n + " seed=" + seed;
            double ref = ReductionsRef.sumOfSquares(x);
            assertThat(Math.abs(Reductions.sumOfSquares(POOLS.three(), s, n) - ref)).as("sumOfSquares, " + what)
                    .isLessThanOrEqualTo(SUM_REL * ref);
            assertThat(Reductions.hasNonFinite(POOLS.three(), s, n)).as("hasNonFinite, " + what).isFalse();
            assertThat((double) Reductions.amax(POOLS.three(), s, n)).as("amax, " + what).isEqualTo(ReductionsRef.amax(x));

            if (n == 0) {
                return;
            }
            // one non-finite value at a random place (the first and the last in turn), then NaN and inf together
            int[] places = {0, n - 1, rnd.nextInt(n), rnd.nextInt(n)};
            float[] specials = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY,
                    Float.intBitsToFloat(0xFF80_0001)};
            for (int k = 0; k < places.length; k++) {
                int at = places[k];
                float special = specials[k];
                double[] y = x.clone();
                y[at] = special;
                s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, at, special);
                String w = what + " with " + special + " at " + at;
                double sum = Reductions.sumOfSquares(POOLS.three(), s, n);
                double want = ReductionsRef.sumOfSquares(y); // NaN or inf
                assertThat(Double.compare(sum, want)).as("sumOfSquares %s, expected %s, %s", sum, want, w).isZero();
                assertThat(Reductions.hasNonFinite(POOLS.three(), s, n)).as("hasNonFinite, " + w).isTrue();
                float amax = Reductions.amax(POOLS.three(), s, n);
                assertThat(Double.compare(amax, ReductionsRef.amax(y))).as("amax %s, %s", amax, w).isZero();
                if (n > 1) {
                    int other = (at + 1 + rnd.nextInt(n - 1)) % n;
                    s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, other, Float.NEGATIVE_INFINITY);
                    y[other] = Double.NEGATIVE_INFINITY;
                    amax = Reductions.amax(POOLS.three(), s, n);
                    assertThat(Double.compare(amax, ReductionsRef.amax(y))).as("amax %s, -inf at %d, %s", amax, other,
                            w).isZero();
                    s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, other, (float) x[other]);
                }
                s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, at, (float) x[at]);
            }
        }
    }

    /**
     * One large square, then millions of squares too small to change it in fp32 (2⁻²⁶ &lt; half an ulp of 1): an
     * fp32 lane that holds the 1 and sums on for a whole chunk would drop its share of them (thousands, ~500u of the
     * total); the block-wise widening keeps the loss within the bound.
     */
    @Test
    void smallSquaresAfterALargeOneAreKept() {
        int n = LARGE;
        double[] x = new double[n];
        java.util.Arrays.fill(x, 0x1p-13);
        x[0] = 1;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = Buffers.floats(arena, x);
            double ref = ReductionsRef.sumOfSquares(x);
            assertThat(Math.abs(Reductions.sumOfSquares(POOLS.three(), s, n) - ref)).as("sumOfSquares of 1, 2^-13…")
                    .isLessThanOrEqualTo(SUM_REL * ref);
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCount() {
        SplittableRandom rnd = new SplittableRandom(23);
        double[] x = Buffers.uniform(rnd, LARGE, 100);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = Buffers.floats(arena, x);
            double one = Reductions.sumOfSquares(POOLS.one(), s, LARGE);
            assertThat(Reductions.sumOfSquares(POOLS.three(), s, LARGE)).as("sumOfSquares, 3 vs 1 threads (seed 23)")
                    .isEqualTo(one);
            assertThat(Reductions.amax(POOLS.three(), s, LARGE)).isEqualTo(Reductions.amax(POOLS.one(), s, LARGE));
        }
    }

    @Test
    void argumentErrors() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = arena.allocate(40);
            assertThatThrownBy(() -> Reductions.sumOfSquares(POOLS.one(), s, -1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be >= 0");
            assertThatThrownBy(() -> Reductions.amax(POOLS.one(), s, 11))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("x holds 10");
            assertThatThrownBy(() -> Reductions.hasNonFinite(POOLS.one(), s, 11))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("x holds 10");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment c = confined.allocate(40);
                assertThatThrownBy(() -> Reductions.sumOfSquares(POOLS.three(), c, 10))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("confined");
                assertThat(Reductions.sumOfSquares(POOLS.one(), c, 10)).isEqualTo(0.0);
            }
        }
    }
}
