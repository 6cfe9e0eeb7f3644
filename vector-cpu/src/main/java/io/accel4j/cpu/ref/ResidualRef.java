package io.accel4j.cpu.ref;

/** The plain-Java residual add in float64: the truth {@link io.accel4j.cpu.ops.Residual} is measured against. */
public final class ResidualRef {

    private ResidualRef() {}

    /** {@code out[i] = inp1[i] + inp2[i]}, i &lt; n. */
    public static void forward(double[] out, double[] inp1, double[] inp2, int n) {
        for (int i = 0; i < n; i++) {
            out[i] = inp1[i] + inp2[i];
        }
    }

    /** {@code dinp1[i] += dout[i]}, {@code dinp2[i] += dout[i]}, i &lt; n. */
    public static void backward(double[] dinp1, double[] dinp2, double[] dout, int n) {
        for (int i = 0; i < n; i++) {
            dinp1[i] += dout[i];
            dinp2[i] += dout[i];
        }
    }
}
