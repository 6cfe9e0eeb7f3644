package io.accel4j.train;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cpu.Simd;

/**
 * Golden values of a whole training run depend on the CPU kernels' vector width: the reductions (layernorm's
 * statistics, softmax sums, the gradient norm) keep one partial sum per lane, so 8 and 16 lanes add in different
 * orders. Each golden test therefore carries one value per width it was recorded at, 512-bit (the AVX-512 machines)
 * and 256-bit (the AVX2 ones), and skips, saying so, at any other width.
 */
public final class WidthGoldens {

    private WidthGoldens() {}

    /** The value recorded at this JVM's vector width. */
    public static String pick(String at512Bits, String at256Bits) {
        int bits = Simd.bits();
        assumeTrue(bits == 512 || bits == 256,
                "golden values are recorded at 512 and 256 bits only; this JVM runs " + Simd.describe());
        return bits == 512 ? at512Bits : at256Bits;
    }
}
