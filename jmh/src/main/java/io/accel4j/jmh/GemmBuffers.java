package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.gemm.Gemm;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * Off-heap operands of one GEMM benchmark: A and B in their element types, filled with seeded random values of
 * magnitude below 2 (fp32 uniform in [−1, 1)), and an fp32 C. 64-byte aligned, owned by a shared arena and freed
 * by {@link #close()}.
 *
 * <p>Narrow types are filled from their bit patterns, so the fill does not depend on the encoders: bf16 is the top
 * half of a random fp32, fp16 its rounding, and fp8 a random sign, a biased exponent at most the bias (so |x| < 2)
 * and a random mantissa — every code finite.
 */
final class GemmBuffers implements AutoCloseable {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT;
    private static final long ALIGN = 64;

    final GemmShape shape;
    final DType aType;
    final DType bType;
    final MemorySegment a;
    final MemorySegment b;
    final MemorySegment c;
    private final Arena arena;

    GemmBuffers(GemmShape shape, DType aType, DType bType, long seed) {
        this.shape = shape;
        this.aType = aType;
        this.bType = bType;
        this.arena = Arena.ofShared();
        SplittableRandom rng = new SplittableRandom(seed);
        this.a = arena.allocate(shape.sizeA() * aType.byteSize(), ALIGN);
        this.b = arena.allocate(shape.sizeB() * bType.byteSize(), ALIGN);
        this.c = arena.allocate(shape.sizeC() * Float.BYTES, ALIGN);
        fillRandom(a, aType, shape.sizeA(), rng);
        fillRandom(b, bType, shape.sizeB(), rng);
    }

    /** Fills {@code n} elements of {@code seg} with random finite values of type {@code t}, |x| < 2. */
    static void fillRandom(MemorySegment seg, DType t, long n, SplittableRandom rng) {
        for (long i = 0; i < n; i++) {
            float f = (float) (rng.nextDouble() * 2 - 1);
            switch (t) {
                case FP32 -> seg.setAtIndex(F32, i, f);
                case BF16 -> seg.setAtIndex(I16, i, (short) (Float.floatToRawIntBits(f) >>> 16));
                case FP16 -> seg.setAtIndex(I16, i, Float.floatToFloat16(f));
                // E4M3: s eeee mmm, bias 7; exponent field 0..7 (0 = subnormal) keeps |x| < 2 and avoids NaN (0x7F).
                case FP8_E4M3 -> seg.set(ValueLayout.JAVA_BYTE, i,
                        (byte) (rng.nextInt(2) << 7 | rng.nextInt(8) << 3 | rng.nextInt(8)));
                // E5M2: s eeeee mm, bias 15; exponent field 0..15 keeps |x| < 2 and avoids Inf/NaN (31).
                case FP8_E5M2 -> seg.set(ValueLayout.JAVA_BYTE, i,
                        (byte) (rng.nextInt(2) << 7 | rng.nextInt(16) << 2 | rng.nextInt(4)));
            }
        }
    }

    /** accel4j's GEMM on these buffers: {@code C = scaleA·scaleB·op(A)·op(B)}, fp32 C, on {@code pool}. */
    void accel4j(Parallel pool, float scaleA, float scaleB) {
        Gemm.gemm(pool, shape.layout(), shape.M(), shape.N(), shape.K(),
                1f, a, aType, shape.lda(), scaleA, b, bType, shape.ldb(), scaleB,
                0f, c, DType.FP32, shape.ldc(), null);
    }

    @Override
    public void close() {
        arena.close();
    }
}
