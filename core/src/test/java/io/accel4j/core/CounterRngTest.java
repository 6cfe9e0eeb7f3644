package io.accel4j.core;

import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class CounterRngTest {

    /** bits(seed, i) is the high half of the (i+1)-th nextLong of the JDK's SplitMix64, for any seed. */
    @Test
    void isSplittableRandomReadByIndex() {
        for (long seed : new long[] {0, 1, -1, 42, Long.MIN_VALUE, Long.MAX_VALUE, 0x1234_5678_9ABC_DEF0L}) {
            SplittableRandom sr = new SplittableRandom(seed);
            for (long i = 0; i < 2000; i++) {
                int expected = (int) (sr.nextLong() >>> 32);
                assertThat(CounterRng.bits(seed, i)).as("seed %d index %d", seed, i).isEqualTo(expected);
            }
        }
    }

    /**
     * Each of the 16 low bits (the ones stochastic rounding uses) is set half the time over 2^20 consecutive indices:
     * a count is Binomial(N, 1/2) with σ = √N/2 = 512, bound 6σ. The low byte is uniform: χ² with 255 degrees of
     * freedom (mean 255, σ = √510 ≈ 22.6) below mean + 6σ.
     */
    @Test
    void lowBitsLookUniform() {
        final int n = 1 << 20;
        final long seed = 7;
        int[] ones = new int[16];
        int[] buckets = new int[256];
        for (long i = 0; i < n; i++) {
            int b = CounterRng.bits(seed, i);
            for (int k = 0; k < 16; k++) {
                ones[k] += (b >>> k) & 1;
            }
            buckets[b & 0xFF]++;
        }
        for (int k = 0; k < 16; k++) {
            assertThat(Math.abs(ones[k] - n / 2)).as("bit %d set %d times of %d", k, ones[k], n)
                    .isLessThanOrEqualTo(6 * 512);
        }
        double expected = n / 256.0, chi2 = 0;
        for (int c : buckets) {
            chi2 += (c - expected) * (c - expected) / expected;
        }
        assertThat(chi2).as("chi-square of the low byte").isLessThan(255 + 6 * Math.sqrt(2 * 255));
    }
}
