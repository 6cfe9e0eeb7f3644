package io.accel4j.cpu.ref;

/**
 * The plain-Java tanh-approximation GELU in float64: the truth {@link io.accel4j.cpu.ops.Gelu} is measured against.
 *
 * <pre>
 *   u(x)     = √(2/π)·(x + 0.044715·x³)
 *   gelu(x)  = 0.5·x·(1 + tanh u)
 *   gelu'(x) = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²)
 * </pre>
 */
public final class GeluRef {

    private GeluRef() {}

    /** √(2/π). */
    public static final double K = Math.sqrt(2 / Math.PI);
    /** The cubic coefficient. */
    public static final double A = 0.044715;

    /** {@code out[i] = gelu(inp[i])}, i &lt; n. */
    public static void forward(double[] out, double[] inp, int n) {
        for (int i = 0; i < n; i++) {
            double x = inp[i];
            out[i] = 0.5 * x * (1 + Math.tanh(K * (x + A * x * x * x)));
        }
    }

    /** {@code dinp[i] += gelu'(inp[i])·dout[i]}, i &lt; n. */
    public static void backward(double[] dinp, double[] inp, double[] dout, int n) {
        for (int i = 0; i < n; i++) {
            double x = inp[i];
            double t = Math.tanh(K * (x + A * x * x * x));
            double grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K * (1 + 3 * A * x * x);
            dinp[i] += grad * dout[i];
        }
    }
}
