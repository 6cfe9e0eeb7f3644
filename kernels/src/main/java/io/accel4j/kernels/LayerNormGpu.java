package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.BLOCK;
import static io.accel4j.kernels.GpuLaunch.COLUMN_BLOCK;

import io.accel4j.core.ops.LayerNormOps;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.MemorySegment;

/**
 * layernorm.cu: {@code out (N, C) = (inp − mean)·rstd·weight + bias}, writing mean and rstd (N), and its backward
 * (dinp, then dweight and dbias in a pass of their own, a thread per column: no atomics). The arguments are checked
 * by the contract's {@link LayerNormOps#checkForward}/{@link LayerNormOps#checkBackward}, as on the CPU.
 */
final class LayerNormGpu {

    /** Rows per block of the warp-per-row kernels (forward and dinp): a warp each. */
    static final int WARP_ROWS = BLOCK / 32;

    private final GpuLaunch gpu;

    LayerNormGpu(GpuLaunch gpu) {
        this.gpu = gpu;
    }

    void forward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp, MemorySegment weight,
                 MemorySegment bias, int N, int C, float eps) {
        LayerNormOps.checkForward(out, mean, rstd, inp, weight, bias, N, C);
        gpu.launch(Kernels.LAYERNORM_FORWARD, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                out, mean, rstd, inp, weight, bias, N, C, eps);
    }

    void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd, int N, int C) {
        LayerNormOps.checkBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
        gpu.launch(Kernels.LAYERNORM_BACKWARD_DINP, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                dinp, dout, inp, weight, mean, rstd, N, C);
        gpu.launch(Kernels.LAYERNORM_BACKWARD_PARAMS, Dim.of((C + COLUMN_BLOCK - 1) / COLUMN_BLOCK),
                Dim.of(COLUMN_BLOCK),
                dweight, dbias, dout, inp, mean, rstd, N, C);
    }
}
