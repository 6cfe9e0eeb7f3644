package io.accel4j.core;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Element types of accel4j tensors, and their exact scalar casts to and from fp32.
 *
 * <p>Decoding ({@link #decode}, {@link #getFloat}) is exact: every value of these formats is a float. Encoding
 * ({@link #encode}, {@link #setFloat}) rounds to nearest, ties to even, with subnormals and signed zeros handled
 * exactly and NaN kept as NaN with its sign; the per-format rules (overflow, NaN codes) are in {@link Bf16},
 * {@link Fp16}, {@link Fp8E4M3} and {@link Fp8E5M2}. The {@code saturate} flag matters only for the fp8 formats (finite
 * overflow and ±inf give ±max instead of NaN / ±inf); FP32, BF16 and FP16 have infinities and overflow to them as
 * IEEE 754 does, whatever the flag says.
 *
 * <p>Memory is little-endian and need not be aligned; {@code index} counts elements of this type.
 */
public enum DType {
    FP32(4), BF16(2), FP16(2), FP8_E4M3(1), FP8_E5M2(1);

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;

    private final int byteSize;

    DType(int byteSize) {
        this.byteSize = byteSize;
    }

    /** Bytes per element. */
    public int byteSize() {
        return byteSize;
    }

    /** True for the two 8-bit float formats. */
    public boolean isFp8() {
        return this == FP8_E4M3 || this == FP8_E5M2;
    }

    /** Largest finite value of this type. */
    public float maxFinite() {
        return switch (this) {
            case FP32 -> Float.MAX_VALUE;
            case BF16 -> 0x1.fep127f;
            case FP16 -> Fp16.MAX;
            case FP8_E4M3 -> Fp8E4M3.MAX;
            case FP8_E5M2 -> Fp8E5M2.MAX;
        };
    }

    /** The value of the code in the low {@code byteSize()·8} bits of {@code bits} (higher bits are ignored); exact. */
    public float decode(int bits) {
        return switch (this) {
            case FP32 -> Float.intBitsToFloat(bits);
            case BF16 -> Bf16.toFloat((short) bits);
            case FP16 -> Fp16.toFloat((short) bits);
            case FP8_E4M3 -> Fp8E4M3.toFloat((byte) bits);
            case FP8_E5M2 -> Fp8E5M2.toFloat((byte) bits);
        };
    }

    /**
     * The code of {@code x} rounded to nearest-even, zero-extended into the low {@code byteSize()·8} bits
     * ({@code saturate}: see the class comment).
     */
    public int encode(float x, boolean saturate) {
        return switch (this) {
            case FP32 -> Float.floatToRawIntBits(x);
            case BF16 -> Bf16.fromFloat(x) & 0xFFFF;
            case FP16 -> Fp16.fromFloat(x) & 0xFFFF;
            case FP8_E4M3 -> Fp8E4M3.fromFloat(x, saturate) & 0xFF;
            case FP8_E5M2 -> Fp8E5M2.fromFloat(x, saturate) & 0xFF;
        };
    }

    /** Reads element {@code index} of a segment holding this type, decoded exactly to float. */
    public float getFloat(MemorySegment seg, long index) {
        return switch (this) {
            case FP32 -> seg.getAtIndex(F32, index);
            case BF16 -> Bf16.toFloat(seg.getAtIndex(I16, index));
            case FP16 -> Fp16.toFloat(seg.getAtIndex(I16, index));
            case FP8_E4M3 -> Fp8E4M3.toFloat(seg.getAtIndex(I8, index));
            case FP8_E5M2 -> Fp8E5M2.toFloat(seg.getAtIndex(I8, index));
        };
    }

    /**
     * Writes {@code v} rounded to nearest-even into element {@code index}; {@code saturate} (fp8 only) turns overflow
     * and ±inf into ±max instead of NaN (E4M3) or ±inf (E5M2).
     */
    public void setFloat(MemorySegment seg, long index, float v, boolean saturate) {
        switch (this) {
            case FP32 -> seg.setAtIndex(F32, index, v);
            case BF16 -> seg.setAtIndex(I16, index, Bf16.fromFloat(v));
            case FP16 -> seg.setAtIndex(I16, index, Fp16.fromFloat(v));
            case FP8_E4M3 -> seg.setAtIndex(I8, index, Fp8E4M3.fromFloat(v, saturate));
            case FP8_E5M2 -> seg.setAtIndex(I8, index, Fp8E5M2.fromFloat(v, saturate));
        }
    }
}
