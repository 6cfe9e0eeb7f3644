package io.accel4j.kernels;

import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.OptimizerOps;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * lion.cu: Lion over one range of the buffers ({@code lion_f32}: one thread per element, grid-stride, the decay factor
 * {@code 1 − lr·λ} computed once on the host as {@link LionConfig#decayFactor()}, every operation rounded on its own
 * as the CPU kernel rounds it). Work is queued on the default stream.
 */
final class LionGpu {

    private final GpuLaunch gpu;

    LionGpu(GpuLaunch gpu) {
        this.gpu = Objects.requireNonNull(gpu, "gpu");
    }

    /** lion_f32 over {@code [offset, offset + length)}. */
    void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length, LionConfig config,
              float gradScale) {
        OptimizerOps.checkLion(params, grads, m, offset, length, config, gradScale);
        if (length > 0) {
            gpu.launchN(Kernels.LION_F32, length, params, grads, m, length, config.lr(), config.beta1(),
                    config.beta2(), config.decayFactor(), gradScale);
        }
    }
}
