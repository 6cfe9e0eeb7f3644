package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;

/**
 * The bytes of a rank whose optimizer is offloaded to the host ({@code --offload-optimizer},
 * {@link io.accel4j.optim.Offload}), on each side, from the shapes alone — exactly what the model and its trainer
 * allocate in the backend's memory and what the offloaded optimizer allocates in host memory:
 * <pre>
 *  device  4Ψ parameters + 4Ψ gradients + activations + batch        (no optimizer state)
 *  host    4Ψ fp32 master + 4Ψ gradient landing buffer + 8Ψ AdamW m, v
 * </pre>
 * So 8 bytes a parameter on the device instead of {@link MemoryPlan}'s 16, for 16 on the host.
 *
 * @param device    the backend's bytes: {@link MemoryPlan} with no optimizer state
 * @param master    the fp32 master weights, 4Ψ
 * @param gradients the host copy of the gradients, 4Ψ
 * @param optimizer AdamW's m and v, 8Ψ
 */
public record OffloadPlan(MemoryPlan device, long master, long gradients, long optimizer) {

    /** The plan of one rank (stage 0: one rank or DDP) training {@code config} on {@code B × T} micro-batches. */
    public static OffloadPlan of(GptConfig config, int B, int T, Recompute recompute) {
        MemoryPlan whole = MemoryPlan.of(config, B, T, recompute);
        long psi = new ParameterLayout(config).count();
        MemoryPlan device = new MemoryPlan(whole.parameters(), whole.gradients(), 0, whole.working(),
                whole.activations(), whole.batch());
        return new OffloadPlan(device, 4 * psi, 4 * psi, whole.optimizer());
    }

    /**
     * {@link #of(GptConfig, int, int, Recompute)} with the saved activations stored in {@code storage} and the
     * gradients in {@code gradients} on the device ({@link MemoryPlan#of(GptConfig, int, int, Recompute, int, int,
     * DType, DType)}: 16-bit gradients are widened chunk by chunk on their way down); the host side is the same (its
     * landing buffer is fp32).
     */
    public static OffloadPlan of(GptConfig config, int B, int T, Recompute recompute, DType storage,
                                 DType gradients) {
        MemoryPlan whole = MemoryPlan.of(config, B, T, recompute, 0, 1, storage, gradients);
        long psi = new ParameterLayout(config).count();
        MemoryPlan device = new MemoryPlan(whole.parameters(), whole.gradients(), 0, whole.working(),
                whole.activations(), whole.batch());
        return new OffloadPlan(device, 4 * psi, 4 * psi, whole.optimizer());
    }

    /** Host bytes in all. */
    public long host() {
        return master + gradients + optimizer;
    }

    /**
     * The largest B whose device side fits {@code budget} bytes with sequences of {@code T} tokens, at most
     * {@code maxBatch}; 0 when not even B = 1 fits (the host side does not grow with B).
     */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, long budget, int maxBatch) {
        long freed = MemoryPlan.of(config, 1, T, recompute).optimizer();
        return MemoryPlan.largestBatch(config, T, recompute, budget + freed, maxBatch);
    }
}
