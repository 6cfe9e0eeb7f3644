package io.accel4j.core.ops;

/**
 * SGD with momentum's hyperparameters for one update, as PyTorch's {@code torch.optim.SGD} takes them (see
 * {@link OptimizerOps#sgd(java.lang.foreign.MemorySegment, java.lang.foreign.MemorySegment,
 * java.lang.foreign.MemorySegment, long, long, SgdConfig, int, float)} for the update).
 *
 * @param lr          learning rate, finite, ≥ 0
 * @param momentum    μ, in [0, 1); 0 is plain SGD (no momentum buffer is read or written)
 * @param dampening   τ, in [0, 1]: the new gradient enters the buffer with weight 1 − τ (not on the first step)
 * @param weightDecay λ, finite, ≥ 0: L2 weight decay, added to the gradient ({@code g += λ·p}), as PyTorch's SGD
 *                    does (not decoupled); 0 for the no-decay group
 * @param nesterov    Nesterov momentum ({@code d = g + μ·buf}); needs μ &gt; 0 and τ = 0, as in PyTorch
 */
public record SgdConfig(float lr, float momentum, float dampening, float weightDecay, boolean nesterov) {

    public SgdConfig {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("lr must be finite and >= 0, got " + lr);
        }
        if (!(momentum >= 0 && momentum < 1)) {
            throw new IllegalArgumentException("momentum must be in [0, 1), got " + momentum);
        }
        if (!(dampening >= 0 && dampening <= 1)) {
            throw new IllegalArgumentException("dampening must be in [0, 1], got " + dampening);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("weightDecay must be finite and >= 0, got " + weightDecay);
        }
        if (nesterov && (momentum == 0 || dampening != 0)) {
            throw new IllegalArgumentException("nesterov needs momentum > 0 and dampening = 0, got momentum="
                    + momentum + ", dampening=" + dampening);
        }
    }

    /** A copy with another learning rate (schedules change it every step). */
    public SgdConfig withLr(float newLr) {
        return new SgdConfig(newLr, momentum, dampening, weightDecay, nesterov);
    }

    /** A copy with another weight decay (0 for the no-decay group). */
    public SgdConfig withWeightDecay(float newWeightDecay) {
        return new SgdConfig(lr, momentum, dampening, newWeightDecay, nesterov);
    }
}
