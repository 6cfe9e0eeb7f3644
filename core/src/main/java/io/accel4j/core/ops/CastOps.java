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

    /**
     * {@link #castFromFp32}'s checks, shared by every backend: dstType BF16, FP16 or FP32; n ≥ 0; dst holds n values
     * of dstType and src n floats. Aliasing stays each backend's own check.
     */
    static void checkFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        java.util.Objects.requireNonNull(dstType, "dstType");
        if (dstType != DType.FP32 && dstType != DType.BF16 && dstType != DType.FP16) {
            throw new IllegalArgumentException("castFromFp32 writes FP32, BF16 or FP16, got " + dstType
                    + ": use castToFp8 for FP8 (it takes a scale and returns the amax)");
        }
        checkLengths(dst, dstType, src, DType.FP32, n);
    }

    /**
     * {@link #castToFp8}'s checks: fp8Type FP8_E4M3 or FP8_E5M2; scale finite and {@code > 0}; n ≥ 0; dst holds n
     * bytes and src n floats.
     */
    static void checkToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        java.util.Objects.requireNonNull(fp8Type, "fp8Type");
        if (!fp8Type.isFp8()) {
            throw new IllegalArgumentException("castToFp8 writes FP8_E4M3 or FP8_E5M2, got " + fp8Type);
        }
        checkScale("scale", scale);
        checkLengths(dst, fp8Type, src, DType.FP32, n);
    }

    /**
     * {@link #castToFp32}'s checks: n ≥ 0; dst holds n floats and src n values of srcType; scaleInv finite and
     * {@code > 0}, and exactly 1 unless srcType is an FP8 type.
     */
    static void checkToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        java.util.Objects.requireNonNull(srcType, "srcType");
        checkLengths(dst, DType.FP32, src, srcType, n);
        if (!srcType.isFp8() && scaleInv != 1f) {
            throw new IllegalArgumentException("scaleInv must be 1 for " + srcType + " (only FP8 is scaled), got "
                    + scaleInv);
        }
        checkScale("scaleInv", scaleInv);
    }

    private static void checkLengths(MemorySegment dst, DType dstType, MemorySegment src, DType srcType, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.elements("dst", dst, n, dstType.byteSize(), dstType + " values");
        OpChecks.elements("src", src, n, srcType.byteSize(), srcType + " values");
    }

    private static void checkScale(String name, float scale) {
        if (!(scale > 0) || !Float.isFinite(scale)) {
            throw new IllegalArgumentException(name + " must be finite and > 0, got " + scale);
        }
    }
}
