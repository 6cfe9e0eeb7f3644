package io.accel4j.cpu.ref;

/**
 * The plain-Java token plus position embedding in float64: the truth {@link io.accel4j.cpu.ops.Encoder} is measured
 * against. Shapes as in {@link io.accel4j.core.ops.EncoderOps}; tokens are assumed valid.
 */
public final class EncoderRef {

    private EncoderRef() {}

    /** {@code out[b,t,:] (B,T,C) = wte[inp[b,t], :] + wpe[t, :]}. */
    public static void forward(double[] out, int[] inp, double[] wte, double[] wpe, int B, int T, int C) {
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                int tok = inp[b * T + t];
                for (int c = 0; c < C; c++) {
                    out[(b * T + t) * C + c] = wte[tok * C + c] + wpe[t * C + c];
                }
            }
        }
    }

    /** {@code dwte[inp[b,t], :] += dout[b,t,:]}, {@code dwpe[t, :] += dout[b,t,:]}, in (b,t) order. */
    public static void backward(double[] dwte, double[] dwpe, double[] dout, int[] inp, int B, int T, int C) {
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                int tok = inp[b * T + t];
                for (int c = 0; c < C; c++) {
                    double d = dout[(b * T + t) * C + c];
                    dwte[tok * C + c] += d;
                    dwpe[t * C + c] += d;
                }
            }
        }
    }
}
