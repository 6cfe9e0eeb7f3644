package io.accel4j.cpu.ref;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.ops.AdamWConfig;

/**
 * The plain-Java reference of {@link io.accel4j.cpu.ops.AdamW}: the textbook AdamW in float64 on double[] state.
 *
 * <p>For each i, with {@code g = gradScale·grads[i]} and step t ≥ 1: {@code m = β1·m + (1−β1)·g},
 * {@code v = β2·v + (1−β2)·g²}, {@code m̂ = m/(1−β1ᵗ)}, {@code v̂ = v/(1−β2ᵗ)},
 * {@code p −= lr·(m̂/(√v̂ + eps) + weightDecay·p)}; the hyperparameters are the config's fp32 values, widened.
 */
public final class AdamWRef {

    private AdamWRef() {}

    /** Updates {@code params}, {@code m}, {@code v} (all of their elements) in float64. */
    public static void update(double[] params, double[] grads, double[] m, double[] v, AdamWConfig config, int step,
                              double gradScale) {
        double b1 = config.beta1(), b2 = config.beta2(), lr = config.lr(), eps = config.eps();
        double wd = config.weightDecay();
        double c1 = 1 - Math.pow(b1, step), c2 = 1 - Math.pow(b2, step);
        for (int i = 0; i < params.length; i++) {
            double g = gradScale * grads[i];
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            double mHat = m[i] / c1, vHat = v[i] / c2;
            params[i] -= lr * (mHat / (Math.sqrt(vHat) + eps) + wd * params[i]);
        }
    }

    /**
     * The bf16 copy of fp32 master weights: element i is {@code Bf16.fromFloatStochastic((float) master[i],
     * CounterRng.bits(seed, offset + i))}.
     */
    public static short[] roundBf16Stochastic(double[] master, long offset, long seed) {
        short[] out = new short[master.length];
        for (int i = 0; i < master.length; i++) {
            out[i] = Bf16.fromFloatStochastic((float) master[i], CounterRng.bits(seed, offset + i));
        }
        return out;
    }
}
