package io.accel4j.kernels;

import io.accel4j.core.ops.OptimizerOps;
import io.accel4j.core.ops.SgdConfig;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * sgd.cu: SGD with momentum over one range of the buffers ({@code sgd_f32}: one thread per element, grid-stride, every
 * operation rounded on its own as the CPU kernel rounds it, so the results are the CPU's bits). Without momentum the
 * momentum buffer is neither read nor written (NULL is passed). Work is queued on the default stream.
 */
final class SgdGpu {

    private final GpuLaunch gpu;

    SgdGpu(GpuLaunch gpu) {
        this.gpu = Objects.requireNonNull(gpu, "gpu");
    }

    /** sgd_f32 over {@code [offset, offset + length)}; step 1 sets {@code buf = g}. */
    void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length, SgdConfig config,
             int step, float gradScale) {
        OptimizerOps.checkSgd(params, grads, buf, offset, length, config, step, gradScale);
        boolean momentum = config.momentum() != 0;
        if (length > 0) {
            gpu.launchN(Kernels.SGD_F32, length, params, grads, momentum ? buf : MemorySegment.NULL, length,
                    config.lr(), config.momentum(), config.dampening(), config.weightDecay(), gradScale,
                    step == 1 ? 1 : 0, config.nesterov() ? 1 : 0);
        }
    }
}
