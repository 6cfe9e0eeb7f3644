package io.accel4j.cpu.ref;

import io.accel4j.core.ops.LayerNormOps;

/**
 * The plain-Java layer normalisation in float64 (two-pass mean and variance), ε = {@link LayerNormOps#EPS}: the
 * truth {@link io.accel4j.cpu.ops.LayerNorm} is measured against. Shapes as in {@link LayerNormOps}.
 */
public final class LayerNormRef {

    private LayerNormRef() {}

    /**
     * For each row: {@code mean = Σx/C}, {@code rstd = 1/√(Σ(x−mean)²/C + ε)},
     * {@code out (N,C) = (x − mean)·rstd·weight + bias}; writes out, mean (N), rstd (N).
     */
    public static void forward(double[] out, double[] mean, double[] rstd, double[] inp, double[] weight,
                               double[] bias, int N, int C) {
        for (int i = 0; i < N; i++) {
            double m = 0;
            for (int c = 0; c < C; c++) {
                m += inp[i * C + c];
            }
            m /= C;
            double v = 0;
            for (int c = 0; c < C; c++) {
                double d = inp[i * C + c] - m;
                v += d * d;
            }
            v /= C;
            double s = 1 / Math.sqrt(v + LayerNormOps.EPS);
            for (int c = 0; c < C; c++) {
                out[i * C + c] = (inp[i * C + c] - m) * s * weight[c] + bias[c];
            }
            mean[i] = m;
            rstd[i] = s;
        }
    }

    /**
     * With {@code x̂ = (x − mean)·rstd} and {@code g = dout·weight}:
     * {@code dinp += rstd·(g − mean_C(g) − x̂·mean_C(g·x̂))}, {@code dweight += Σ_rows dout·x̂},
     * {@code dbias += Σ_rows dout}.
     */
    public static void backward(double[] dinp, double[] dweight, double[] dbias, double[] dout, double[] inp,
                                double[] weight, double[] mean, double[] rstd, int N, int C) {
        for (int i = 0; i < N; i++) {
            double gMean = 0, gxMean = 0;
            for (int c = 0; c < C; c++) {
                double xhat = (inp[i * C + c] - mean[i]) * rstd[i];
                double g = dout[i * C + c] * weight[c];
                gMean += g;
                gxMean += g * xhat;
            }
            gMean /= C;
            gxMean /= C;
            for (int c = 0; c < C; c++) {
                double xhat = (inp[i * C + c] - mean[i]) * rstd[i];
                double g = dout[i * C + c] * weight[c];
                dinp[i * C + c] += rstd[i] * (g - gMean - xhat * gxMean);
                dweight[c] += dout[i * C + c] * xhat;
                dbias[c] += dout[i * C + c];
            }
        }
    }
}
