package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * cast.cu's {@code cast_transpose_f32_to_fp8}: an fp32 matrix's FP8 codes and their transpose in one pass, with the
 * amax, per block, in partials of this object. Needs no cuBLAS: {@link GpuOps#castTransposeToFp8} offers it where
 * cuBLASLt is missing, and {@link GpuMatmul} uses it for its FP8 operands. Owns its partials buffer.
 */
final class CastTransposeGpu implements AutoCloseable {

    private static final int CAST_BLOCK = 256;
    /** A tile's 32 columns × CAST_BLOCK / 32 row phases. */
    static final Dim BLOCK = Dim.of(32, CAST_BLOCK / 32);
    /** Most blocks (grid-stride over the tiles beyond), and so the partials. */
    static final int MAX_BLOCKS = 1024;

    private final CudaKernel kernel;
    /** The per-block amax partials ({@value #MAX_BLOCKS} uints, each a max |x| as its bit pattern). */
    private final DeviceBuffer partials;

    CastTransposeGpu(CudaContext context, CudaKernel kernel) {
        this.kernel = Objects.requireNonNull(kernel, "kernel");
        this.partials = context.allocate(4L * MAX_BLOCKS);
    }

    /**
     * {@code dst (R,C) = fp8(src (R,C)·scale)} and {@code dstT (C,R)} its transpose, as {@code fp8Type} (saturating,
     * rounding bit-identical to {@link GpuOps#castToFp8}); returns {@code max |src|} (NaN ignored), a copy back to the
     * host, so it waits for the work queued before.
     */
    float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R, int C,
                             float scale) {
        Objects.requireNonNull(fp8Type, "fp8Type");
        if (!fp8Type.isFp8()) {
            throw new IllegalArgumentException("castTransposeToFp8 writes FP8_E4M3 or FP8_E5M2, got " + fp8Type);
        }
        GpuLaunch.positive("R", R); GpuLaunch.positive("C", C);
        Fp8LinearGpu.scaleFactor("scale", scale);
        long n = (long) R * C;
        GpuLaunch.need("dst", dst, n, 1); GpuLaunch.need("dstT", dstT, n, 1); GpuLaunch.need("src", src, n, 4);
        int tiles = launch(dst, dstT, fp8Type, src, R, C, scale);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_INT, tiles);
            partials.copyTo(host); // synchronous: after the kernel
            return CastGpu.maxBitsOfPartials(host, tiles);
        }
    }

    /** Queues the kernel (arguments checked by the caller), its amax partials into {@link #partials()}; the grid. */
    int launch(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R, int C, float scale) {
        int tiles = grid(R, C);
        Kernels.CAST_TRANSPOSE_F32_TO_FP8.launch(kernel, Dim.of(tiles), BLOCK, 0, null,
                dst, dstT, GpuOps.device(partials), src, R, C, scale, fp8Type == DType.FP8_E4M3 ? 1 : 0);
        return tiles;
    }

    /** The partials of the last launch, as a device view. */
    MemorySegment partials() {
        return GpuOps.device(partials);
    }

    /** The grid: a block per 32×32 tile of (R, C), at most {@value #MAX_BLOCKS} (grid-stride). */
    static int grid(int R, int C) {
        return (int) Math.min(MAX_BLOCKS, ((R + 31L) / 32) * ((C + 31L) / 32));
    }

    @Override
    public void close() {
        partials.close();
    }
}
