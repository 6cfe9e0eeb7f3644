package io.accel4j.core;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Element types of accel4j tensors. SKELETON: the exact casts arrive with the dtype work. */
public enum DType {
    FP32(4), BF16(2), FP16(2), FP8_E4M3(1), FP8_E5M2(1);

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;

    private final int byteSize;

    DType(int byteSize) {
        this.byteSize = byteSize;
    }

    /** Bytes per element. */
    public int byteSize() {
        return byteSize;
    }

    /** Reads element {@code index} of a segment holding this type, decoded exactly to float. */
    public float getFloat(MemorySegment seg, long index) {
        return switch (this) {
            case FP32 -> seg.getAtIndex(F32, index);
            case BF16 -> Float.intBitsToFloat(seg.getAtIndex(I16, index) << 16);
            case FP16 -> Float.float16ToFloat(seg.getAtIndex(I16, index));
            default -> throw new UnsupportedOperationException("TODO " + this);
        };
    }

    /** Writes {@code v} rounded to nearest-even into element {@code index}; FP8_E4M3 saturates when asked. */
    public void setFloat(MemorySegment seg, long index, float v, boolean saturate) {
        switch (this) {
            case FP32 -> seg.setAtIndex(F32, index, v);
            case FP16 -> seg.setAtIndex(I16, index, Float.floatToFloat16(v));
            default -> throw new UnsupportedOperationException("TODO " + this);
        }
    }
}
