package io.accel4j.core;

import java.util.Random;
import java.util.SplittableRandom;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

import static io.accel4j.core.CastReference.BF16;
import static org.assertj.core.api.Assertions.assertThat;

/** {@link Bf16#fromFloatStochastic}: always a neighbour, rounds up with exactly the right probability, unbiased. */
class StochasticRoundingTest {

    private static final long SEED = 0x5EED_B0F1_6000L;

    /** Floats that exercise the edges: zeros, float subnormals, bf16's top binade, max float, infinities. */
    private static final float[] EDGES = {
        0f, -0f, Float.MIN_VALUE, -Float.MIN_VALUE, 0x1.234p-140f, 0x1.fffffcp-127f, Float.MIN_NORMAL, 1f, -1f,
        1.00390625f /* 1 + half a bf16 ulp */, 0x1.fep127f, 0x1.fe01p127f, 0x1.ffp127f, Float.MAX_VALUE,
        -Float.MAX_VALUE, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 3.1415927f, -2.7182817f, 1e-30f
    };

    /** Any non-NaN bit pattern: every exponent equally likely, so subnormals and the top binade get their share. */
    @Provide
    Arbitrary<Float> anyFloat() {
        return Arbitraries.integers().map(Float::intBitsToFloat).filter(f -> !Float.isNaN(f))
                .edgeCases(c -> c.add(0f));
    }

    @Property(tries = 20_000)
    void alwaysOneOfTheTwoNeighbours(@ForAll("anyFloat") float x, @ForAll int randomBits) {
        assertNeighbour(x, randomBits);
    }

    @Test
    void edgesAreAlwaysANeighbour() {
        SplittableRandom rnd = new SplittableRandom(SEED);
        for (float x : EDGES) {
            for (int r : new int[] {0, 1, 0x7FFF, 0x8000, 0xFFFF, -1, rnd.nextInt(), rnd.nextInt()}) {
                assertNeighbour(x, r);
            }
        }
    }

    /**
     * Over all 2^16 values of the random bits, the number that round away from zero is exactly the discarded fraction
     * {@code (|x| − below) / ulp · 2^16}: the probability of rounding up is exact, not just close.
     */
    @Test
    void roundsUpWithExactlyTheDiscardedFraction() {
        Random rnd = new Random(SEED);
        float[] xs = new float[EDGES.length + 300];
        System.arraycopy(EDGES, 0, xs, 0, EDGES.length);
        for (int i = EDGES.length; i < xs.length; i++) {
            float x;
            do {
                x = Float.intBitsToFloat(rnd.nextInt());
            } while (Float.isNaN(x));
            xs[i] = x;
        }
        for (float x : xs) {
            if (Float.isInfinite(x)) {
                continue;
            }
            double[] nb = BF16.neighboursAbs(x);
            double discarded = nb[1] == nb[0] ? 0 : (Math.abs((double) x) - nb[0]) / (nb[1] - nb[0]) * 65536;
            assertThat(discarded).as("x=0x%08x: the fraction is a multiple of 2^-16", Float.floatToRawIntBits(x))
                    .isEqualTo(Math.rint(discarded));
            int ups = 0;
            for (int r = 0; r < 1 << 16; r++) {
                double v = Math.abs((double) Bf16.toFloat(Bf16.fromFloatStochastic(x, r)));
                if (v != nb[0]) {
                    ups++;
                }
            }
            assertThat(ups).as("x=0x%08x (%s): values of the 16 random bits that round up",
                    Float.floatToRawIntBits(x), x).isEqualTo((int) discarded);
        }
    }

    /**
     * With {@link CounterRng} bits, the mean of N stochastically rounded copies of x is x within 6σ. One rounding is
     * {@code below + ulp·Bernoulli(p)}, variance {@code ulp²·p(1−p) ≤ ulp²/4}, so the mean's σ is at most
     * {@code ulp/(2√N)}; 6σ is a false alarm with probability about 2e-9 per x (and the seed is fixed).
     */
    @Test
    void meanOfManyRoundingsIsUnbiased() {
        final int n = 1 << 14;
        final double sigmas = 6;
        Random rnd = new Random(SEED);
        for (int t = 0; t < 100; t++) {
            float x = (float) Math.scalb(1 + rnd.nextDouble(), rnd.nextInt(-140, 120)) * (rnd.nextBoolean() ? 1 : -1);
            long seed = rnd.nextLong();
            double[] nb = BF16.neighboursAbs(x);
            double ulp = nb[1] - nb[0];
            double sum = 0;
            for (int i = 0; i < n; i++) {
                sum += Bf16.toFloat(Bf16.fromFloatStochastic(x, CounterRng.bits(seed, i)));
            }
            double mean = sum / n;
            double bound = sigmas * ulp / (2 * Math.sqrt(n));
            assertThat(Math.abs(mean - x)).as("x=%s (0x%08x), seed %d: |mean − x| over %d roundings, ulp %s",
                    x, Float.floatToRawIntBits(x), seed, n, ulp).isLessThanOrEqualTo(bound);
        }
    }

    @Test
    void reproducibleForTheSameSeedAndIndex() {
        float x = 1.00390625f; // exactly halfway: every element is a coin flip
        long seed = SEED;
        int differ = 0;
        for (long i = 0; i < 1000; i++) {
            short a = Bf16.fromFloatStochastic(x, CounterRng.bits(seed, i));
            short b = Bf16.fromFloatStochastic(x, CounterRng.bits(seed, i));
            assertThat(a).as("index %d", i).isEqualTo(b);
            if (a != Bf16.fromFloatStochastic(x, CounterRng.bits(seed + 1, i))) {
                differ++;
            }
        }
        assertThat(differ).as("another seed gives other coin flips").isBetween(400, 600);
    }

    @Test
    void nanAndInfinityAsInRoundToNearest() {
        for (int bits : new int[] {0x7F80_0001, 0xFF80_0001, 0x7FC0_0000, 0xFFFF_FFFF, 0x7FA1_2345, 0x7F80_0000,
                0xFF80_0000}) {
            float x = Float.intBitsToFloat(bits);
            for (int r : new int[] {0, 0xFFFF, 0x1234}) {
                assertThat(Bf16.fromFloatStochastic(x, r)).as("x=0x%08x r=0x%x", bits, r)
                        .isEqualTo(Bf16.fromFloat(x));
            }
        }
        // just below max float: rounds up to inf with the discarded fraction's probability
        assertThat(Bf16.toFloat(Bf16.fromFloatStochastic(Float.MAX_VALUE, 0xFFFF))).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(Bf16.toFloat(Bf16.fromFloatStochastic(Float.MAX_VALUE, 0))).isEqualTo(0x1.fep127f);
    }

    private static void assertNeighbour(float x, int randomBits) {
        float v = Bf16.toFloat(Bf16.fromFloatStochastic(x, randomBits));
        double[] nb = Float.isInfinite(x) ? new double[] {Double.POSITIVE_INFINITY, Double.POSITIVE_INFINITY}
                : BF16.neighboursAbs(x);
        double above = nb[1] > BF16.max() ? Double.POSITIVE_INFINITY : nb[1];
        int xb = Float.floatToRawIntBits(x);
        assertThat(Math.abs((double) v)).as("x=0x%08x (%s), random bits 0x%08x: |result| is a neighbour of |x|",
                xb, x, randomBits).isIn(nb[0], above);
        assertThat(Float.floatToRawIntBits(v) < 0).as("x=0x%08x (%s): sign kept", xb, x).isEqualTo(xb < 0);
    }
}
