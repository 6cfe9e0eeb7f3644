package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.COLUMN_BLOCK;

import io.accel4j.core.ops.EncoderOps;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.MemorySegment;

/**
 * encoder.cu: {@code out (B·T, C) = wte[inp] + wpe[t]} and its backward into dwte and dwpe. The arguments are
 * checked by the contract's {@link EncoderOps#checkForward}/{@link EncoderOps#checkBackward}, as on the CPU.
 */
final class EncoderGpu {

    /** Vocabulary buckets of encoder_backward_wte (the grid's y). */
    static final int WTE_BUCKETS = 32;

    private final GpuLaunch gpu;

    EncoderGpu(GpuLaunch gpu) {
        this.gpu = gpu;
    }

    void forward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe, int B, int T, int C,
                 int V) {
        EncoderOps.checkForward(out, inp, wte, wpe, B, T, C, V);
        long bt = (long) B * T;
        gpu.launchN(Kernels.ENCODER_FORWARD, bt * C, out, inp, wte, wpe, B, T, C);
    }

    void backward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp, int B, int T, int C,
                  int V) {
        EncoderOps.checkBackward(dwte, dwpe, dout, inp, B, T, C, V);
        long bt = (long) B * T;
        gpu.launchN(Kernels.ENCODER_BACKWARD_WPE, (long) T * C, dwpe, dout, B, T, C);
        gpu.launch(Kernels.ENCODER_BACKWARD_WTE, Dim.of((C + COLUMN_BLOCK - 1) / COLUMN_BLOCK, WTE_BUCKETS),
                Dim.of(COLUMN_BLOCK),
                dwte, dout, inp, Math.toIntExact(bt), C);
    }
}
