package io.accel4j.cpu.ref;

/** The linear layer in plain float64 loops: the truth {@link io.accel4j.cpu.ops.Matmul} is checked against. */
public final class MatmulRef {

    private MatmulRef() {}

    /** {@code out (N,OC) = inp (N,C)·weightᵀ + bias}, weight stored (OC,C); bias may be null. */
    public static void forward(double[] out, double[] inp, double[] weight, double[] bias, int N, int C, int OC) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) {
                double s = bias == null ? 0 : bias[o];
                for (int c = 0; c < C; c++) {
                    s += inp[n * C + c] * weight[o * C + c];
                }
                out[n * OC + o] = s;
            }
        }
    }

    /** {@code dinp += dout·weight}, {@code dweight += doutᵀ·inp}, {@code dbias += Σ_rows dout} (dbias may be null). */
    public static void backward(double[] dinp, double[] dweight, double[] dbias, double[] dout,
                                double[] inp, double[] weight, int N, int C, int OC) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) {
                double d = dout[n * OC + o];
                for (int c = 0; c < C; c++) {
                    dinp[n * C + c] += d * weight[o * C + c];
                    dweight[o * C + c] += d * inp[n * C + c];
                }
                if (dbias != null) {
                    dbias[o] += d;
                }
            }
        }
    }
}
