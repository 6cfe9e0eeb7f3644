package io.accel4j.cpu;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.DType;
import io.accel4j.core.Fp16;
import io.accel4j.core.Fp8E4M3;
import io.accel4j.core.Fp8E5M2;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;

/**
 * Bulk casts between fp32 and the low-precision formats over ranges of memory, vectorised.
 *
 * <p>Every element gets exactly what the scalar cast of {@code io.accel4j.core} gives it ({@link Bf16}, {@link Fp16},
 * {@link Fp8E4M3}, {@link Fp8E5M2}): round to nearest-even, exact decodes, the same NaN and overflow rules. Each cast
 * is one vector loop over {@link Simd#FLOAT}'s lane count of elements a step (the 16-bit and 8-bit sides use the
 * short/byte species of half/quarter the width), then one scalar tail loop that calls the core casts. The scalar loop
 * does everything with {@code -Daccel4j.vector.bits=scalar}, and does the fp8 casts at 128-bit width (a quarter of
 * it would be a 32-bit byte vector, which the Vector API does not have). The fp16 casts hand a step that holds a NaN
 * to the scalar loop: which NaN bits {@link Float#floatToFloat16} gives is up to the platform.
 *
 * <p>The lane-wise code is written out inside each loop, not in helper methods that take or return vectors: C2 may
 * compile such a helper on its own first and then decline to inline it, and every vector passed is then boxed
 * (several times slower). For the same reason the kernels never reinterpret ints that came from floats back to floats (JDK 25's C2
 * boxes that too): they load the input a second time, or stay in one domain.
 *
 * <p>Arguments, in this order: the output segment and its first element, the input and its first element, the
 * element count {@code n}, then the cast's own parameters. Indices count elements of the segment's own type; memory is
 * little-endian and need not be aligned. Checked at the entry: sizes and indices (IllegalArgumentException naming the
 * argument and the numbers), a closed arena (IllegalStateException), a read-only output, overlapping input and output.
 * The casts run on the calling thread; they are pure per element, so callers may split a range across threads (the
 * stochastic cast included: its random bits depend only on the seed and the element's index).
 */
public final class Casts {

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final VectorSpecies<Integer> I = F.withLanes(int.class);
    /** Floats per vector, and per step of every vector loop. */
    private static final int L = F.length();
    /** L shorts: half the float vector's bits. */
    private static final VectorSpecies<Short> S = F.vectorBitSize() >= 128
            ? VectorSpecies.of(short.class, VectorShape.forBitSize(F.vectorBitSize() / 2)) : null;
    /** L bytes: a quarter of the float vector's bits (none for 128-bit floats: there is no 32-bit species). */
    private static final VectorSpecies<Byte> B = F.vectorBitSize() >= 256
            ? VectorSpecies.of(byte.class, VectorShape.forBitSize(F.vectorBitSize() / 4)) : null;
    private static final boolean VECTOR = !Simd.SCALAR && F.vectorBitSize() >= 128;
    private static final boolean VECTOR_FP8 = VECTOR && B != null;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;

    private Casts() {}

    // ---------------------------------------------------------------------------------------------------- BF16

    /** {@code dst[dstIndex+i] (bf16) = Bf16.fromFloat(src[srcIndex+i] (fp32))} for i in [0, n): RNE. */
    public static void f32ToBf16(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n) {
        check(dst, dstIndex, 2, src, srcIndex, 4, n);
        long d = dstIndex * 2, s = srcIndex * 4, i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) { // Bf16.fromFloat lane-wise
                IntVector bits = IntVector.fromMemorySegment(I, src, s + i * 4, LE);
                IntVector hi = bits.lanewise(LSHR, 16);
                IntVector code = bits.add(hi.and(1)).add(0x7FFF).lanewise(LSHR, 16)
                        .blend(hi.or(0x40), bits.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
                code.convertShape(VectorOperators.I2S, S, 0).intoMemorySegment(dst, d + i * 2, LE);
            }
        }
        for (; i < n; i++) {
            dst.set(I16, d + i * 2, Bf16.fromFloat(src.get(F32, s + i * 4)));
        }
    }

    /** {@link #f32ToBf16(MemorySegment, long, MemorySegment, long, long)} from a float array. */
    public static void f32ToBf16(MemorySegment dst, long dstIndex, float[] src, int srcIndex, int n) {
        f32ToBf16(dst, dstIndex, MemorySegment.ofArray(Objects.requireNonNull(src, "src")), srcIndex, n);
    }

    /**
     * Stochastic rounding to bf16: element {@code i} is {@code Bf16.fromFloatStochastic(src[srcIndex+i],
     * CounterRng.bits(seed, index0 + i))}, so the result depends on {@code (seed, index0 + i)} only, not on how a
     * range is split into calls or threads. {@code index0} is the global index of the first element (e.g. its offset
     * in the parameter tensor); use a fresh seed per step.
     */
    public static void f32ToBf16Stochastic(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n,
                                           long seed, long index0) {
        check(dst, dstIndex, 2, src, srcIndex, 4, n);
        long d = dstIndex * 2, s = srcIndex * 4, i = 0;
        if (VECTOR) {
            // the random bits come from scalar code: SplitMix64 needs 64-bit multiplies, which AVX2 lacks
            int[] random = new int[L];
            for (long bound = n - n % L; i < bound; i += L) { // Bf16.fromFloatStochastic lane-wise
                for (int j = 0; j < L; j++) {
                    random[j] = CounterRng.bits(seed, index0 + i + j);
                }
                IntVector bits = IntVector.fromMemorySegment(I, src, s + i * 4, LE);
                IntVector code = bits.add(IntVector.fromArray(I, random, 0).and(0xFFFF)).lanewise(LSHR, 16)
                        .blend(bits.lanewise(LSHR, 16).or(0x40), bits.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
                code.convertShape(VectorOperators.I2S, S, 0).intoMemorySegment(dst, d + i * 2, LE);
            }
        }
        for (; i < n; i++) {
            float x = src.get(F32, s + i * 4);
            dst.set(I16, d + i * 2, Bf16.fromFloatStochastic(x, CounterRng.bits(seed, index0 + i)));
        }
    }

    /** {@code dst[dstIndex+i] (fp32) = Bf16.toFloat(src[srcIndex+i] (bf16))}: exact, NaN payloads kept. */
    public static void bf16ToF32(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n) {
        check(dst, dstIndex, 4, src, srcIndex, 2, n);
        long d = dstIndex * 4, s = srcIndex * 2, i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                ShortVector h = ShortVector.fromMemorySegment(S, src, s + i * 2, LE);
                ((IntVector) h.convertShape(VectorOperators.S2I, I, 0)).lanewise(LSHL, 16)
                        .intoMemorySegment(dst, d + i * 4, LE);
            }
        }
        for (; i < n; i++) {
            dst.set(F32, d + i * 4, Bf16.toFloat(src.get(I16, s + i * 2)));
        }
    }

    /** {@link #bf16ToF32(MemorySegment, long, MemorySegment, long, long)} into a float array. */
    public static void bf16ToF32(float[] dst, int dstIndex, MemorySegment src, long srcIndex, int n) {
        bf16ToF32(MemorySegment.ofArray(Objects.requireNonNull(dst, "dst")), dstIndex, src, srcIndex, n);
    }

    // ---------------------------------------------------------------------------------------------------- FP16

    /**
     * {@code dst[dstIndex+i] (fp16) = Fp16.fromFloat(src[srcIndex+i] (fp32))} for i in [0, n): RNE, overflow to ±inf,
     * bit-identical to {@link Float#floatToFloat16} (a step holding a NaN is done by the scalar loop, since which NaN
     * payload the JDK produces depends on the platform).
     */
    public static void f32ToF16(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n) {
        check(dst, dstIndex, 2, src, srcIndex, 4, n);
        long d = dstIndex * 2, s = srcIndex * 4, i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                IntVector bits = IntVector.fromMemorySegment(I, src, s + i * 4, LE);
                IntVector abs = bits.and(0x7FFF_FFFF);
                if (abs.compare(GT, 0x7F80_0000).anyTrue()) { // a NaN: the JDK decides its bits
                    for (long j = i; j < i + L; j++) {
                        dst.set(I16, d + j * 2, Fp16.fromFloat(src.get(F32, s + j * 4)));
                    }
                    continue;
                }
                // the floats are loaded again, not reinterpreted from the ints: C2 (JDK 25) is slow at that
                FloatVector x = FloatVector.fromMemorySegment(F, src, s + i * 4, LE);
                IntVector normal = abs.add(0xFFF - (112 << 23)).add(abs.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13);
                // |x| < 2^-14: |x| + 0.5 has an ulp of 2^-24, the fp16 subnormal spacing: the add rounds for us
                IntVector sub = x.abs().add(0.5f).reinterpretAsInts().sub(Float.floatToRawIntBits(0.5f));
                IntVector code = normal.blend(sub, abs.compare(LT, Float.floatToRawIntBits(0x1p-14f)))
                        .blend(0x7C00, abs.compare(GE, Float.floatToRawIntBits(65520f)))
                        .or(bits.lanewise(LSHR, 16).and(0x8000));
                code.convertShape(VectorOperators.I2S, S, 0).intoMemorySegment(dst, d + i * 2, LE);
            }
        }
        for (; i < n; i++) {
            dst.set(I16, d + i * 2, Fp16.fromFloat(src.get(F32, s + i * 4)));
        }
    }

    /** {@link #f32ToF16(MemorySegment, long, MemorySegment, long, long)} from a float array. */
    public static void f32ToF16(MemorySegment dst, long dstIndex, float[] src, int srcIndex, int n) {
        f32ToF16(dst, dstIndex, MemorySegment.ofArray(Objects.requireNonNull(src, "src")), srcIndex, n);
    }

    /** {@code dst[dstIndex+i] (fp32) = Fp16.toFloat(src[srcIndex+i] (fp16))}: exact (NaN codes: as the JDK does). */
    public static void f16ToF32(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n) {
        check(dst, dstIndex, 4, src, srcIndex, 2, n);
        long d = dstIndex * 4, s = srcIndex * 2, i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                ShortVector h = ShortVector.fromMemorySegment(S, src, s + i * 2, LE);
                if (h.and((short) 0x7FFF).compare(GT, (short) 0x7C00).anyTrue()) { // a NaN: the JDK decides its bits
                    for (long j = i; j < i + L; j++) {
                        dst.set(F32, d + j * 4, Fp16.toFloat(src.get(I16, s + j * 2)));
                    }
                    continue;
                }
                IntVector code = ((IntVector) h.convertShape(VectorOperators.S2I, I, 0)).and(0xFFFF);
                IntVector em = code.and(0x7FFF);
                IntVector normal = em.lanewise(LSHL, 13).add(112 << 23).blend(0x7F80_0000, em.compare(EQ, 0x7C00));
                IntVector sub = ((FloatVector) em.convert(VectorOperators.I2F, 0)).mul(0x1p-24f).reinterpretAsInts();
                normal.blend(sub, em.compare(LT, 0x400)).or(code.and(0x8000).lanewise(LSHL, 16))
                        .intoMemorySegment(dst, d + i * 4, LE);
            }
        }
        for (; i < n; i++) {
            dst.set(F32, d + i * 4, Fp16.toFloat(src.get(I16, s + i * 2)));
        }
    }

    /** {@link #f16ToF32(MemorySegment, long, MemorySegment, long, long)} into a float array. */
    public static void f16ToF32(float[] dst, int dstIndex, MemorySegment src, long srcIndex, int n) {
        f16ToF32(MemorySegment.ofArray(Objects.requireNonNull(dst, "dst")), dstIndex, src, srcIndex, n);
    }

    // ---------------------------------------------------------------------------------------------------- FP8

    /**
     * The fp8 rounding of a format, as lane-wise constants; see {@link Fp8E4M3} and {@link Fp8E5M2} for the rules.
     *
     * @param shift        fp32 mantissa bits dropped (23 − mantissa bits)
     * @param rebias       subtracted from an fp32 pattern to re-bias its exponent ((127 − bias) &lt;&lt; 23)
     * @param minNormal    bit pattern of the smallest normal value; below it the subnormal path
     * @param magic        a float whose ulp is the subnormal spacing (2^23 · min subnormal)
     * @param lastFinite   largest |x| bit pattern that does not overflow
     * @param maxCode      code of the largest finite value (the saturated result)
     * @param overflowCode non-saturated overflow result: NaN (E4M3) or inf (E5M2)
     * @param infCode      magnitude code of infinity (E4M3 has none: 0x80, never reached)
     * @param nanCode      smallest NaN magnitude code
     * @param minSub       value of the smallest subnormal
     */
    private record Fp8(int shift, int rebias, int minNormal, float magic, int lastFinite, int maxCode,
                       int overflowCode, int infCode, int nanCode, float minSub) {

        static final Fp8 E4M3 = new Fp8(20, 120 << 23, Float.floatToRawIntBits(Fp8E4M3.MIN_NORMAL), 0x1p14f,
                Float.floatToRawIntBits(464f), 0x7E, 0x7F, 0x80, 0x7F, Fp8E4M3.MIN_SUBNORMAL);
        static final Fp8 E5M2 = new Fp8(21, 112 << 23, Float.floatToRawIntBits(Fp8E5M2.MIN_NORMAL), 0x1p7f,
                Float.floatToRawIntBits(61440f) - 1, 0x7B, 0x7C, 0x7C, 0x7D, Fp8E5M2.MIN_SUBNORMAL);

        static Fp8 of(DType t) {
            return t == DType.FP8_E4M3 ? E4M3 : E5M2;
        }

        /** Codes below this are subnormal (the smallest normal code, 1 &lt;&lt; mantissa bits). */
        int minNormalCode() {
            return 1 << (23 - shift);
        }
    }

    /**
     * {@code dst[dstIndex+i] (fp8) = encode(src[srcIndex+i] · scale)} for i in [0, n), where the product is the fp32
     * product (rounded once to fp32, then to fp8 — as the GPU's scaled casts do) and {@code encode} is
     * {@code Fp8E4M3.fromFloat(·, saturate)} or {@code Fp8E5M2.fromFloat(·, saturate)}.
     *
     * @param fp8   {@link DType#FP8_E4M3} or {@link DType#FP8_E5M2}
     * @param scale finite and positive; the delayed-scaling factor (e.g. {@code 448 / amax} of earlier steps)
     * @return amax, the largest |x| of the unscaled input: NaN elements are ignored, an infinity gives +inf, 0 when
     *         {@code n == 0} or every element is NaN
     */
    public static float f32ToFp8(DType fp8, MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n,
                                 float scale, boolean saturate) {
        Fp8 f = fp8(fp8);
        checkScale("scale", scale);
        check(dst, dstIndex, 1, src, srcIndex, 4, n);
        long d = dstIndex, s = srcIndex * 4, i = 0;
        int amaxBits = 0; // |x| compares as its bit pattern
        if (VECTOR_FP8) {
            int shift = f.shift(), roundBias = (1 << (shift - 1)) - 1 - f.rebias();
            int magicBits = Float.floatToRawIntBits(f.magic());
            int overflowCode = saturate ? f.maxCode() : f.overflowCode();
            IntVector amax = IntVector.zero(I);
            for (long bound = n - n % L; i < bound; i += L) { // Fp8E4M3/E5M2.fromFloat(x · scale) lane-wise
                IntVector xAbs = IntVector.fromMemorySegment(I, src, s + i * 4, LE).and(0x7FFF_FFFF);
                amax = amax.max(xAbs.blend(0, xAbs.compare(GT, 0x7F80_0000)));
                FloatVector y = FloatVector.fromMemorySegment(F, src, s + i * 4, LE).mul(scale);
                IntVector bits = y.reinterpretAsInts();
                IntVector abs = bits.and(0x7FFF_FFFF);
                IntVector normal = abs.add(roundBias).add(abs.lanewise(LSHR, shift).and(1)).lanewise(LSHR, shift);
                // below the smallest normal: |y| + magic has an ulp equal to the subnormal spacing
                IntVector sub = y.abs().add(f.magic()).reinterpretAsInts().sub(magicBits);
                IntVector code = normal.blend(sub, abs.compare(LT, f.minNormal()))
                        .blend(overflowCode, abs.compare(GT, f.lastFinite()))
                        .blend(0x7F, abs.compare(GT, 0x7F80_0000))
                        .or(bits.lanewise(LSHR, 24).and(0x80));
                code.convertShape(VectorOperators.I2B, B, 0).intoMemorySegment(dst, d + i, LE);
            }
            amaxBits = amax.reduceLanes(VectorOperators.MAX);
        }
        boolean e4m3 = fp8 == DType.FP8_E4M3;
        for (; i < n; i++) {
            float x = src.get(F32, s + i * 4);
            int abs = Float.floatToRawIntBits(x) & 0x7FFF_FFFF;
            if (abs <= 0x7F80_0000) {
                amaxBits = Math.max(amaxBits, abs);
            }
            float y = x * scale;
            dst.set(I8, d + i, e4m3 ? Fp8E4M3.fromFloat(y, saturate) : Fp8E5M2.fromFloat(y, saturate));
        }
        return Float.intBitsToFloat(amaxBits);
    }

    /** {@link #f32ToFp8(DType, MemorySegment, long, MemorySegment, long, long, float, boolean)} from a float array. */
    public static float f32ToFp8(DType fp8, MemorySegment dst, long dstIndex, float[] src, int srcIndex, int n,
                                 float scale, boolean saturate) {
        return f32ToFp8(fp8, dst, dstIndex, MemorySegment.ofArray(Objects.requireNonNull(src, "src")), srcIndex, n,
                scale, saturate);
    }

    /**
     * {@code dst[dstIndex+i] (fp32) = decode(src[srcIndex+i] (fp8)) · scaleInv}, the fp32 product: exact when
     * {@code scaleInv} is 1 (or any power of two that keeps the result normal). Pass the reciprocal the encode used
     * ({@code 1 / scale}), computed once, as the GPU kernels do. NaN codes decode to the quiet NaN with the code's
     * sign.
     *
     * @param fp8      {@link DType#FP8_E4M3} or {@link DType#FP8_E5M2}
     * @param scaleInv finite and positive
     */
    public static void fp8ToF32(DType fp8, MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n,
                                float scaleInv) {
        Fp8 f = fp8(fp8);
        checkScale("scaleInv", scaleInv);
        check(dst, dstIndex, 4, src, srcIndex, 1, n);
        long d = dstIndex * 4, s = srcIndex, i = 0;
        if (VECTOR_FP8) {
            int shift = f.shift();
            for (long bound = n - n % L; i < bound; i += L) { // Fp8E4M3/E5M2.toFloat(c) · scaleInv lane-wise
                IntVector code = ((IntVector) ByteVector.fromMemorySegment(B, src, s + i, LE)
                        .convertShape(VectorOperators.B2I, I, 0)).and(0xFF);
                IntVector mag = code.and(0x7F);
                if (scaleInv == 1f) {
                    IntVector sub = ((FloatVector) mag.convert(VectorOperators.I2F, 0)).mul(f.minSub())
                            .reinterpretAsInts();
                    mag.lanewise(LSHL, shift).add(f.rebias())
                            .blend(sub, mag.compare(LT, f.minNormalCode()))
                            .blend(0x7F80_0000, mag.compare(GE, f.infCode()))
                            .blend(0x7FC0_0000, mag.compare(GE, f.nanCode()))
                            .or(code.and(0x80).lanewise(LSHL, 24))
                            .intoMemorySegment(dst, d + i * 4, LE);
                } else {
                    // the same in the float domain: C2 (JDK 25) is slow to reinterpret ints that came from floats
                    FloatVector normal = mag.lanewise(LSHL, shift).add(f.rebias())
                            .blend(0x7F80_0000, mag.compare(GE, f.infCode()))
                            .blend(0x7FC0_0000, mag.compare(GE, f.nanCode()))
                            .or(code.and(0x80).lanewise(LSHL, 24)).reinterpretAsFloats();
                    FloatVector signedMinSub = FloatVector.broadcast(F, f.minSub())
                            .blend(-f.minSub(), code.compare(GE, 0x80).cast(F));
                    FloatVector sub = ((FloatVector) mag.convert(VectorOperators.I2F, 0)).mul(signedMinSub);
                    normal.blend(sub, mag.compare(LT, f.minNormalCode()).cast(F)).mul(scaleInv)
                            .intoMemorySegment(dst, d + i * 4, LE);
                }
            }
        }
        boolean e4m3 = fp8 == DType.FP8_E4M3;
        for (; i < n; i++) {
            byte c = src.get(I8, s + i);
            dst.set(F32, d + i * 4, (e4m3 ? Fp8E4M3.toFloat(c) : Fp8E5M2.toFloat(c)) * scaleInv);
        }
    }

    /** {@link #fp8ToF32(DType, MemorySegment, long, MemorySegment, long, long, float)} into a float array. */
    public static void fp8ToF32(DType fp8, float[] dst, int dstIndex, MemorySegment src, long srcIndex, int n,
                                float scaleInv) {
        fp8ToF32(fp8, MemorySegment.ofArray(Objects.requireNonNull(dst, "dst")), dstIndex, src, srcIndex, n, scaleInv);
    }

    // ---------------------------------------------------------------------------------------------------- checks

    private static Fp8 fp8(DType t) {
        Objects.requireNonNull(t, "fp8");
        if (!t.isFp8()) {
            throw new IllegalArgumentException("fp8 must be FP8_E4M3 or FP8_E5M2, got " + t);
        }
        return Fp8.of(t);
    }

    private static void checkScale(String name, float scale) {
        if (!(scale > 0) || !Float.isFinite(scale)) {
            throw new IllegalArgumentException(name + " must be finite and > 0, got " + scale);
        }
    }

    /** Sizes, liveness, writability and aliasing of one cast's output and input ranges. */
    private static void check(MemorySegment dst, long dstIndex, int dstBytes,
                              MemorySegment src, long srcIndex, int srcBytes, long n) {
        Objects.requireNonNull(dst, "dst");
        Objects.requireNonNull(src, "src");
        if (n < 0) {
            throw new IllegalArgumentException("n must be >= 0, got " + n);
        }
        checkRange("dst", dst, dstIndex, dstBytes, n);
        checkRange("src", src, srcIndex, srcBytes, n);
        if (dst.isReadOnly()) {
            throw new IllegalArgumentException("dst is a read-only segment");
        }
        if (n > 0 && src.asSlice(srcIndex * srcBytes, n * srcBytes)
                .asOverlappingSlice(dst.asSlice(dstIndex * dstBytes, n * dstBytes)).isPresent()) {
            throw new IllegalArgumentException("dst elements [" + dstIndex + ", " + (dstIndex + n) + ") overlap src "
                    + "elements [" + srcIndex + ", " + (srcIndex + n) + "): casts do not work in place");
        }
    }

    private static void checkRange(String name, MemorySegment seg, long index, int elemBytes, long n) {
        if (!seg.scope().isAlive()) {
            throw new IllegalStateException(name + "'s memory has been freed (its arena is closed)");
        }
        if (index < 0) {
            throw new IllegalArgumentException(name + "Index must be >= 0, got " + index);
        }
        long capacity = seg.byteSize() / elemBytes;
        if (index > capacity || n > capacity - index) {
            throw new IllegalArgumentException(name + " holds " + capacity + " elements of " + elemBytes
                    + " bytes (" + seg.byteSize() + " bytes), but " + name + "Index " + index + " + n " + n
                    + " = " + (index + n) + " are needed");
        }
    }
}
