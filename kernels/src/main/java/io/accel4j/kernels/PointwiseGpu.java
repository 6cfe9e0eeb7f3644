package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.need;
import static io.accel4j.kernels.GpuLaunch.nonNegative;

import java.lang.foreign.MemorySegment;

/** gelu.cu and residual.cu: the element-wise ops, grid-stride over n elements (nothing queued for n = 0). */
final class PointwiseGpu {

    private final GpuLaunch gpu;

    PointwiseGpu(GpuLaunch gpu) {
        this.gpu = gpu;
    }

    void geluForward(MemorySegment out, MemorySegment inp, long n) {
        nonNegative("n", n); need("out", out, n, 4); need("inp", inp, n, 4);
        if (n > 0) {
            gpu.launchN(Kernels.GELU_FORWARD, n, out, inp, n);
        }
    }

    void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        nonNegative("n", n); need("dinp", dinp, n, 4); need("inp", inp, n, 4); need("dout", dout, n, 4);
        if (n > 0) {
            gpu.launchN(Kernels.GELU_BACKWARD, n, dinp, inp, dout, n);
        }
    }

    void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        nonNegative("n", n); need("out", out, n, 4); need("inp1", inp1, n, 4); need("inp2", inp2, n, 4);
        if (n > 0) {
            gpu.launchN(Kernels.RESIDUAL_FORWARD, n, out, inp1, inp2, n);
        }
    }

    void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        nonNegative("n", n); need("dinp1", dinp1, n, 4); need("dinp2", dinp2, n, 4); need("dout", dout, n, 4);
        if (n > 0) {
            gpu.launchN(Kernels.RESIDUAL_BACKWARD, n, dinp1, dinp2, dout, n);
        }
    }
}
