package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.BLOCK;
import static io.accel4j.kernels.GpuLaunch.COLUMN_BLOCK;
import static io.accel4j.kernels.GpuLaunch.need;
import static io.accel4j.kernels.GpuLaunch.positive;

import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.MemorySegment;

/**
 * layernorm.cu: {@code out (N, C) = (inp − mean)·rstd·weight + bias}, writing mean and rstd (N), and its backward
 * (dinp, then dweight and dbias in a pass of their own, a thread per column: no atomics).
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
        positive("N", N); positive("C", C);
        long nc = (long) N * C;
        need("out", out, nc, 4); need("mean", mean, N, 4); need("rstd", rstd, N, 4);
        need("inp", inp, nc, 4); need("weight", weight, C, 4); need("bias", bias, C, 4);
        gpu.launch(Kernels.LAYERNORM_FORWARD, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                out, mean, rstd, inp, weight, bias, N, C, eps);
    }

    void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd, int N, int C) {
        positive("N", N); positive("C", C);
        long nc = (long) N * C;
        need("dinp", dinp, nc, 4); need("dweight", dweight, C, 4); need("dbias", dbias, C, 4);
        need("dout", dout, nc, 4); need("inp", inp, nc, 4); need("weight", weight, C, 4);
        need("mean", mean, N, 4); need("rstd", rstd, N, 4);
        gpu.launch(Kernels.LAYERNORM_BACKWARD_DINP, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                dinp, dout, inp, weight, mean, rstd, N, C);
        gpu.launch(Kernels.LAYERNORM_BACKWARD_PARAMS, Dim.of((C + COLUMN_BLOCK - 1) / COLUMN_BLOCK),
                Dim.of(COLUMN_BLOCK),
                dweight, dbias, dout, inp, mean, rstd, N, C);
    }
}
