package io.accel4j.cpu.ops;

import io.accel4j.core.CounterRng;
import io.accel4j.cpu.Simd;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * A block of {@link CounterRng#bits} at consecutive indices, the random bits of stochastic rounding:
 * <pre>
 *   dst[k] = CounterRng.bits(seed, index0 + k) = (int) (mix64(seed + (index0 + k + 1)·γ) &gt;&gt;&gt; 32)     k &lt; n
 * </pre>
 * With 512-bit vectors the counter and SplitMix64's finaliser run on 8 lanes of 64 bits (the multiplies are AVX-512DQ's
 * {@code vpmullq}); integer arithmetic, so the bits are exactly the scalar ones. With narrower vectors it is the
 * scalar loop: AVX2 has no 64-bit multiply, and the Vector API would emulate it.
 */
final class RandomBits {

    /** 8 lanes of 64 bits, used only when the kernels' vectors are 512 bits wide. */
    private static final VectorSpecies<Long> LONGS = LongVector.SPECIES_512;
    private static final VectorSpecies<Integer> INTS = IntVector.SPECIES_256;
    private static final int LANES = LONGS.length();
    /** Whether the 64-bit lanes are used (see the class comment). */
    static final boolean VECTOR = !Simd.SCALAR && Simd.bits() == 512;

    private RandomBits() {}

    /** Fills {@code dst[0, n)} with the bits of indices {@code index0 …}; see the class comment. */
    static void fill(int[] dst, int n, long seed, long index0) {
        int k = 0;
        if (VECTOR) {
            LongVector lane = LongVector.zero(LONGS).addIndex(1); // 0, 1, …, 7
            for (int end = n - n % LANES; k < end; k += LANES) {
                LongVector z = lane.add(index0 + k + 1).mul(CounterRng.GAMMA).add(seed);
                z = z.lanewise(VectorOperators.XOR, z.lanewise(VectorOperators.LSHR, 30)).mul(0xBF58_476D_1CE4_E5B9L);
                z = z.lanewise(VectorOperators.XOR, z.lanewise(VectorOperators.LSHR, 27)).mul(0x94D0_49BB_1331_11EBL);
                z = z.lanewise(VectorOperators.XOR, z.lanewise(VectorOperators.LSHR, 31));
                z.lanewise(VectorOperators.LSHR, 32).convertShape(VectorOperators.L2I, INTS, 0)
                        .reinterpretAsInts().intoArray(dst, k);
            }
        }
        for (; k < n; k++) {
            dst[k] = CounterRng.bits(seed, index0 + k);
        }
    }
}
