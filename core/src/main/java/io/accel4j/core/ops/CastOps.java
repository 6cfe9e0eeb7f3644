package io.accel4j.core.ops;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;

/** Bulk casts between fp32 and the narrow types, exactly as {@link DType#encode}/{@link DType#decode} round. */
public interface CastOps {

    /**
     * {@code dst[i] (dstType) = round(scale·src[i])}, round to nearest even; FP8 saturates to its largest finite
     * value. {@code scale} must be 1 unless {@code dstType} is an FP8 type.
     *
     * @return the amax of the unscaled input (NaN ignored), for delayed FP8 scaling; 0 when n is 0
     */
    float castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n, float scale);

    /** {@code dst[i] (fp32) = decode(src[i]) · scale}; exact for scale 1. */
    void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scale);
}
