package io.accel4j.core.ops;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;

/**
 * Everything a training step asks of a backend (see the package documentation for the conventions). The CPU
 * backend is {@code io.accel4j.cpu.ops.CpuOps}; the GPU backend implements the same interface, so model code runs
 * unchanged on either.
 */
public interface Ops extends EncoderOps, LayerNormOps, MatmulOps, AttentionOps, PointwiseOps, ClassifierOps,
        OptimizerOps, ReductionOps, CastOps {

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
}
