package io.accel4j.cpu.ref;

import io.accel4j.core.ops.SgdConfig;

/**
 * The plain-Java reference of {@link io.accel4j.cpu.ops.Sgd}: PyTorch's {@code torch.optim.SGD} step in float64 on
 * double[] state, the hyperparameters being the config's fp32 values, widened.
 *
 * <p>For each i, with μ, τ, λ the momentum, dampening and weight decay: {@code g = gradScale·grads[i] + λ·p};
 * {@code buf = g} on the first step, else {@code buf = μ·buf + (1 − τ)·g}; {@code d = nesterov ? g + μ·buf : buf};
 * {@code p −= lr·d}. With μ = 0, {@code d = g} and {@code buf} is not touched (it may be null).
 */
public final class SgdRef {

    private SgdRef() {}

    /** Updates {@code params} and {@code buf} (all of their elements) in float64. */
    public static void update(double[] params, double[] grads, double[] buf, SgdConfig config, int step,
                              double gradScale) {
        double lr = config.lr(), mu = config.momentum(), tau = config.dampening(), wd = config.weightDecay();
        for (int i = 0; i < params.length; i++) {
            double g = gradScale * grads[i] + wd * params[i];
            double d = g;
            if (mu != 0) {
                buf[i] = step == 1 ? g : mu * buf[i] + (1 - tau) * g;
                d = config.nesterov() ? g + mu * buf[i] : buf[i];
            }
            params[i] -= lr * d;
        }
    }
}
