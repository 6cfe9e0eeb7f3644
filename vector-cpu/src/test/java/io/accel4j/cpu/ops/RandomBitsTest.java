package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.CounterRng;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link RandomBits#fill} against {@link CounterRng#bits} element by element (integer arithmetic: exact), at odd
 * lengths, seeds and starting indices including negative ones and ones near the ends of the long range (the counter
 * wraps as the scalar one does), the destination poisoned first and the elements past n left alone.
 */
class RandomBitsTest {

    @Test
    void blocksAreTheScalarStream() {
        long seed0 = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed0);
        long[] starts = {0, 1, -1, 7, Long.MAX_VALUE - 5, Long.MIN_VALUE, 1L << 40, -123_456_789L};
        for (int trial = 0; trial < 40; trial++) {
            long seed = trial < 4 ? trial : rnd.nextLong();
            long index0 = trial < starts.length ? starts[trial] : rnd.nextLong();
            int n = trial == 0 ? 0 : 1 + rnd.nextInt(300);
            int[] dst = new int[n + 9];
            Arrays.fill(dst, 0xDEAD_BEEF);
            RandomBits.fill(dst, n, seed, index0);
            for (int k = 0; k < n; k++) {
                assertThat(dst[k]).as("seed0 %d: seed %d index %d", seed0, seed, index0 + k)
                        .isEqualTo(CounterRng.bits(seed, index0 + k));
            }
            for (int k = n; k < dst.length; k++) {
                assertThat(dst[k]).as("dst[%d] past n = %d", k, n).isEqualTo(0xDEAD_BEEF);
            }
        }
    }
}
