package io.accel4j.core.ops;

/**
 * Everything a training step asks of a backend (see the package documentation for the conventions). The CPU
 * backend is {@code io.accel4j.cpu.ops.CpuOps}; the GPU backend implements the same interface, so model code runs
 * unchanged on either.
 */
public interface Ops extends EncoderOps, LayerNormOps, MatmulOps, AttentionOps, PointwiseOps, ClassifierOps,
        OptimizerOps, ReductionOps, CastOps {

    /** A one-line description for logs and {@code accel4j doctor}, e.g. {@code cpu: Vector API 256-bit, 2 threads}. */
    String describe();
}
