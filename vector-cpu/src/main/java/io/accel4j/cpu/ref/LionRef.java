package io.accel4j.cpu.ref;

import io.accel4j.core.ops.LionConfig;

/**
 * The plain-Java reference of {@link io.accel4j.cpu.ops.Lion}: the paper's update (Chen et al. 2023, Program 1) in
 * float64 on double[] state, the hyperparameters being the config's fp32 values, widened.
 *
 * <p>For each i: {@code g = gradScale·grads[i]}; {@code c = β1·m + (1−β1)·g};
 * {@code p = p·(1 − lr·λ) − lr·sign(c)} ({@link Math#signum}: sign(±0) = ±0, sign(NaN) = NaN);
 * {@code m = β2·m + (1−β2)·g}.
 */
public final class LionRef {

    private LionRef() {}

    /**
     * Updates {@code params} and {@code m} (all of their elements) in float64; returns each element's {@code c}, the
     * value whose sign was the update (for tests that must know how close to 0 it was).
     */
    public static double[] update(double[] params, double[] grads, double[] m, LionConfig config, double gradScale) {
        double lr = config.lr(), b1 = config.beta1(), b2 = config.beta2(), wd = config.weightDecay();
        double[] c = new double[params.length];
        for (int i = 0; i < params.length; i++) {
            double g = gradScale * grads[i];
            c[i] = b1 * m[i] + (1 - b1) * g;
            params[i] = params[i] * (1 - lr * wd) - lr * Math.signum(c[i]);
            m[i] = b2 * m[i] + (1 - b2) * g;
        }
        return c;
    }
}
