package io.accel4j.kernels;

import io.accel4j.core.ops.ClassifierOps;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.HostCopy;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * classifier.cu: the fused softmax / cross-entropy of {@code logits (N, Vp)} (the first V columns) against the
 * targets, a block per row, writing each row's loss and, for the backward, the gradient in place of the logits;
 * returns the mean loss (a copy of the N losses back to the host, which waits for the kernel).
 */
final class ClassifierGpu {

    /** Threads per block (a block per row). */
    static final int BLOCK = 512;

    private final GpuLaunch gpu;
    private final CudaContext context;

    ClassifierGpu(GpuLaunch gpu, CudaContext context) {
        this.gpu = gpu;
        this.context = context;
    }

    double run(MemorySegment logits, MemorySegment losses, MemorySegment targets, int N, int V, int Vp,
               float dlossScale, boolean backward) {
        ClassifierOps.checkSizes(losses, logits, targets, N, V, Vp);
        gpu.launch(Kernels.CLASSIFIER, Dim.of(N), Dim.of(BLOCK), logits, losses, targets, N, V, Vp, dlossScale,
                backward ? 1 : 0);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, N);
            context.makeCurrent();
            HostCopy.toHost(host, losses.address(), 4L * N);
            double sum = 0;
            for (int i = 0; i < N; i++) {
                sum += host.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            }
            return sum / N;
        }
    }
}
