package io.accel4j.kernels;

import io.accel4j.core.ops.PointwiseOps;
import java.lang.foreign.MemorySegment;

/**
 * gelu.cu and residual.cu: the element-wise ops, grid-stride over n elements (nothing queued for n = 0). The
 * arguments are checked by the contract's {@link PointwiseOps} checkers, as on the CPU.
 */
final class PointwiseGpu {

    private final GpuLaunch gpu;

    PointwiseGpu(GpuLaunch gpu) {
        this.gpu = gpu;
    }

    void geluForward(MemorySegment out, MemorySegment inp, long n) {
        PointwiseOps.checkGeluForward(out, inp, n);
        if (n > 0) {
            gpu.launchN(Kernels.GELU_FORWARD, n, out, inp, n);
        }
    }

    void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        PointwiseOps.checkGeluBackward(dinp, inp, dout, n);
        if (n > 0) {
            gpu.launchN(Kernels.GELU_BACKWARD, n, dinp, inp, dout, n);
        }
    }

    void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        PointwiseOps.checkResidualForward(out, inp1, inp2, n);
        if (n > 0) {
            gpu.launchN(Kernels.RESIDUAL_FORWARD, n, out, inp1, inp2, n);
        }
    }

    void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        PointwiseOps.checkResidualBackward(dinp1, dinp2, dout, n);
        if (n > 0) {
            gpu.launchN(Kernels.RESIDUAL_BACKWARD, n, dinp1, dinp2, dout, n);
        }
    }
}
