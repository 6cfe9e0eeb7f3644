package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.BLOCK;
import static io.accel4j.kernels.GpuLaunch.blocks;

import io.accel4j.core.DType;
import io.accel4j.core.ops.CastOps;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * cast.cu: fp32 to and from bf16, fp16 and the FP8 formats (bit-identical to {@link DType#encode} /
 * {@link DType#decode}), the FP8 cast returning its amax from per-block partials, and the FP8 cast-transpose
 * ({@link CastTransposeGpu}, made on first use). A cast between equal types is a device copy. Owns the
 * cast-transpose's partials.
 */
final class CastGpu implements AutoCloseable {

    private final GpuLaunch gpu;
    private final Partials partials;
    private final CudaContext context;
    /** The FP8 cast-transpose; null until the first call. */
    private CastTransposeGpu castTranspose;

    CastGpu(GpuLaunch gpu, Partials partials, CudaContext context) {
        this.gpu = gpu;
        this.partials = partials;
        this.context = context;
    }

    void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        CastOps.checkFromFp32(dst, dstType, src, n);
        disjoint(dst, dstType, src, DType.FP32, n);
        if (n == 0) {
            return;
        }
        switch (dstType) {
            case FP32 -> copyOnDevice(dst, src, 4 * n);
            case BF16 -> gpu.launchN(Kernels.CAST_F32_TO_BF16, n, dst, src, n);
            case FP16 -> gpu.launchN(Kernels.CAST_F32_TO_F16, n, dst, src, n);
            default -> throw new IllegalArgumentException("castFromFp32 writes FP32, BF16 or FP16, got " + dstType
                    + ": use castToFp8 for FP8 (it takes a scale and returns the amax)");
        }
    }

    float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        CastOps.checkToFp8(dst, fp8Type, src, n, scale);
        disjoint(dst, fp8Type, src, DType.FP32, n);
        if (n == 0) {
            return 0f;
        }
        int grid = blocks(n);
        gpu.launch(Kernels.CAST_F32_TO_FP8, Dim.of(grid), Dim.of(BLOCK), dst, partials.device(), src, n, scale,
                fp8Type == DType.FP8_E4M3 ? 1 : 0);
        try (Arena arena = Arena.ofConfined()) {
            return maxBitsOfPartials(partials.onHost(arena, ValueLayout.JAVA_INT, grid), grid);
        }
    }

    /**
     * The amax of the fp8 casts from their {@code grid} partials, each a max |x| as its bit pattern (NaN already left
     * out by the kernel): the largest pattern, as a float.
     */
    static float maxBitsOfPartials(MemorySegment partials, int grid) {
        int max = 0;
        for (int b = 0; b < grid; b++) {
            max = Math.max(max, partials.getAtIndex(ValueLayout.JAVA_INT, b));
        }
        return Float.intBitsToFloat(max);
    }

    void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        CastOps.checkToFp32(dst, src, srcType, n, scaleInv);
        disjoint(dst, DType.FP32, src, srcType, n);
        if (n == 0) {
            return;
        }
        switch (srcType) {
            case FP32 -> copyOnDevice(dst, src, 4 * n);
            case BF16 -> gpu.launchN(Kernels.CAST_BF16_TO_F32, n, dst, src, n);
            case FP16 -> gpu.launchN(Kernels.CAST_F16_TO_F32, n, dst, src, n);
            default -> gpu.launchN(Kernels.CAST_FP8_TO_F32, n, dst, src, n, scaleInv,
                    srcType == DType.FP8_E4M3 ? 1 : 0);
        }
    }

    /** {@link CastTransposeGpu#castTransposeToFp8}, which needs no cuBLAS. */
    float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R, int C,
                             float scale) {
        if (castTranspose == null) {
            castTranspose = new CastTransposeGpu(context, gpu.kernel(Kernels.CAST_TRANSPOSE_F32_TO_FP8));
        }
        return castTranspose.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }

    /** Past the contract's checks ({@link CastOps}): dst and src do not overlap (device addresses). */
    private static void disjoint(MemorySegment dst, DType dstType, MemorySegment src, DType srcType, long n) {
        long dEnd = dst.address() + n * dstType.byteSize(), sEnd = src.address() + n * srcType.byteSize();
        if (n > 0 && dst.address() < sEnd && src.address() < dEnd) {
            throw new IllegalArgumentException("dst [0x" + Long.toHexString(dst.address()) + ", 0x"
                    + Long.toHexString(dEnd) + ") overlaps src [0x" + Long.toHexString(src.address()) + ", 0x"
                    + Long.toHexString(sEnd) + ")");
        }
    }

    /** Queues a device-to-device copy on the default stream (in order with the kernels). */
    private void copyOnDevice(MemorySegment dst, MemorySegment src, long bytes) {
        context.makeCurrent();
        CudaException.check("cuMemcpyDtoDAsync_v2",
                cuda_h.cuMemcpyDtoDAsync_v2(dst.address(), src.address(), bytes, MemorySegment.NULL));
    }

    @Override
    public void close() {
        if (castTranspose != null) {
            castTranspose.close();
        }
    }
}
