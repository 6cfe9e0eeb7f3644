package io.accel4j.cpu.testing;

import java.util.function.ToDoubleFunction;

/**
 * Central finite differences in float64: the independent check of every backward. A reference backward computes
 * the gradient of a scalar {@code L(x) = Σ dout·f(x)}; this computes {@code (L(x+h·eᵢ) − L(x−h·eᵢ)) / 2h} for
 * each i. With smooth f and h = 1e-5 the truncation error is O(h²·f''') ≈ 1e-10 and the cancellation error
 * O(ε·|L|/h) ≈ 1e-11·|L|, so analytic and numerical gradients agree to about 1e-7 relative.
 */
public final class FiniteDifferences {

    private FiniteDifferences() {}

    /** The default step. */
    public static final double H = 1e-5;

    /** The numerical gradient of {@code loss} at {@code x} (x is restored afterwards). */
    public static double[] gradient(double[] x, ToDoubleFunction<double[]> loss) {
        double[] g = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            double xi = x[i];
            x[i] = xi + H;
            double up = loss.applyAsDouble(x);
            x[i] = xi - H;
            double down = loss.applyAsDouble(x);
            x[i] = xi;
            g[i] = (up - down) / (2 * H);
        }
        return g;
    }

    /** {@code Σ a[i]·b[i]}: the scalar loss {@code Σ dout·out} whose gradient a backward computes. */
    public static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }
}
