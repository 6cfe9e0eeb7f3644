package io.accel4j.core.ops;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;

/** Bulk casts between fp32 and the narrow types, rounding exactly as {@link DType#encode} does. */
public interface CastOps {

    /** {@code dst[i] (dstType) = round(src[i])}, round to nearest even; {@code dstType} is BF16, FP16 or FP32. */
    void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n);

    /**
     * {@code dst[i] (fp8Type) = round(scale·src[i])}, round to nearest even, saturating to the type's largest finite
     * value (the delayed-scaling recipe: {@code scale = fp8Max / amax of earlier steps}).
     *
     * @return the amax of the unscaled input, NaN ignored (0 when n is 0), for the next steps' scale
     */
    float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale);

    /**
     * {@code dst[i] (fp32) = decode(src[i]) · scaleInv}: exact for BF16, FP16 and FP32 (scaleInv must then be 1);
     * for FP8 pass the reciprocal of the scale the encode used.
     */
    void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv);
}
