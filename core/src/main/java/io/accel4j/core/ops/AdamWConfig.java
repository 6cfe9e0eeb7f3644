package io.accel4j.core.ops;

/**
 * AdamW's hyperparameters for one update.
 *
 * @param lr          learning rate, ≥ 0
 * @param beta1       first-moment decay, in [0, 1)
 * @param beta2       second-moment decay, in [0, 1)
 * @param eps         added to √v̂, > 0
 * @param weightDecay decoupled weight decay, ≥ 0 (0 for the no-decay group)
 */
public record AdamWConfig(float lr, float beta1, float beta2, float eps, float weightDecay) {

    public AdamWConfig {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("lr must be finite and >= 0, got " + lr);
        }
        if (!(beta1 >= 0 && beta1 < 1)) {
            throw new IllegalArgumentException("beta1 must be in [0, 1), got " + beta1);
        }
        if (!(beta2 >= 0 && beta2 < 1)) {
            throw new IllegalArgumentException("beta2 must be in [0, 1), got " + beta2);
        }
        if (!(eps > 0) || !Float.isFinite(eps)) {
            throw new IllegalArgumentException("eps must be finite and > 0, got " + eps);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("weightDecay must be finite and >= 0, got " + weightDecay);
        }
    }

    /** A copy with another learning rate (schedules change it every step). */
    public AdamWConfig withLr(float newLr) {
        return new AdamWConfig(newLr, beta1, beta2, eps, weightDecay);
    }

    /** A copy with another weight decay (0 for the no-decay group). */
    public AdamWConfig withWeightDecay(float newWeightDecay) {
        return new AdamWConfig(lr, beta1, beta2, eps, newWeightDecay);
    }
}
