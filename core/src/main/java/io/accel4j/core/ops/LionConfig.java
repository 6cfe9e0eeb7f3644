package io.accel4j.core.ops;

/**
 * Lion's hyperparameters for one update (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"; see
 * {@link OptimizerOps#lion(java.lang.foreign.MemorySegment, java.lang.foreign.MemorySegment,
 * java.lang.foreign.MemorySegment, long, long, LionConfig, float)} for the update). The paper's defaults are
 * β1 = 0.9, β2 = 0.99, with a learning rate 3–10× smaller than AdamW's and a weight decay 3–10× larger.
 *
 * @param lr          learning rate, finite, ≥ 0
 * @param beta1       interpolation of the momentum and the gradient whose sign is the update, in [0, 1)
 * @param beta2       momentum decay, in [0, 1)
 * @param weightDecay λ, finite, ≥ 0: decoupled ({@code p ·= 1 − lr·λ}); 0 for the no-decay group
 */
public record LionConfig(float lr, float beta1, float beta2, float weightDecay) {

    public LionConfig {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("lr must be finite and >= 0, got " + lr);
        }
        if (!(beta1 >= 0 && beta1 < 1)) {
            throw new IllegalArgumentException("beta1 must be in [0, 1), got " + beta1);
        }
        if (!(beta2 >= 0 && beta2 < 1)) {
            throw new IllegalArgumentException("beta2 must be in [0, 1), got " + beta2);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("weightDecay must be finite and >= 0, got " + weightDecay);
        }
    }

    /** A copy with another learning rate (schedules change it every step). */
    public LionConfig withLr(float newLr) {
        return new LionConfig(newLr, beta1, beta2, weightDecay);
    }

    /** A copy with another weight decay (0 for the no-decay group). */
    public LionConfig withWeightDecay(float newWeightDecay) {
        return new LionConfig(lr, beta1, beta2, newWeightDecay);
    }

    /**
     * The factor the decoupled weight decay multiplies the parameters by, {@code 1 − lr·λ}, computed in float64 and
     * rounded once to fp32: every backend uses this value, so their results can agree bit for bit.
     */
    public float decayFactor() {
        return (float) (1 - (double) lr * weightDecay);
    }
}
