package io.accel4j.core.ops;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import java.lang.foreign.MemorySegment;

/**
 * Everything a training step asks of a backend (see the package documentation for the conventions). The CPU
 * backend is {@code io.accel4j.cpu.ops.CpuOps}; the GPU backend implements the same interface, so model code runs
 * unchanged on either.
 */
public interface Ops extends EncoderOps, LayerNormOps, MatmulOps, AttentionOps, PointwiseOps, ClassifierOps,
        OptimizerOps, ReductionOps, CastOps, VocabParallelOps {

    /** A one-line description for logs and {@code accel4j doctor}, e.g. {@code cpu: Vector API 256-bit, 2 threads}. */
    String describe();

    /**
     * The memory this backend computes in: every segment passed to it is one of this memory's device segments (or a
     * slice of one), and host code moves data in and out only through its copies. The default is
     * {@link HostMemory}, for a CPU backend, which takes any host segment; a device backend returns its own.
     */
    default DeviceMemory memory() {
        return HostMemory.INSTANCE;
    }

    /**
     * {@link MatmulOps#matmulForwardGelu} unfused, for a backend without the fusion: {@code matmulForward} into
     * {@code pre}, then {@code geluForward(out, pre)}.
     */
    @Override
    default void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                                   MemorySegment bias, int N, int C, int OC, DType operands) {
        matmulForward(pre, inp, weight, bias, N, C, OC, operands);
        geluForward(out, pre, (long) N * OC);
    }

    /**
     * {@link MatmulOps#matmulBackwardGelu} unfused, for a backend without the fusion, with scratch from
     * {@link #memory()}: {@code matmulBackward} with its dinp into zeroed scratch {@code g}, {@code dpre} zeroed and
     * {@code geluBackward(dpre, pre, g)}, then {@code dpreBias += Σ_rows dpre} as the bias gradient of a
     * {@code matmulBackward} of {@code dpre} with one input channel of zeros (its other gradients are zero scratch).
     */
    @Override
    default void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                    MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                    MemorySegment weight, int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        long n = (long) N * C;
        if (dpre.byteSize() < n * Float.BYTES) {
            throw new IllegalArgumentException("dpre holds " + dpre.byteSize() / Float.BYTES + " floats, N*C = " + n
                    + " needed");
        }
        try (DeviceArena scratch = memory().arena()) {
            MemorySegment g = scratch.allocate(n * Float.BYTES);
            matmulBackward(g, dweight, dbias, dout, inp, weight, N, C, OC, operands);
            memory().zero(dpre.asSlice(0, n * Float.BYTES));
            geluBackward(dpre, pre, g, n);
            if (dpreBias != null) {
                long rowBytes = (long) N * Float.BYTES, colBytes = (long) C * Float.BYTES;
                matmulBackward(scratch.allocate(rowBytes), scratch.allocate(colBytes), dpreBias, dpre,
                        scratch.allocate(rowBytes), scratch.allocate(colBytes), N, 1, C, DType.FP32);
            }
        }
    }
}
