package io.accel4j.cpu.ref;

import io.accel4j.core.Bf16;

/**
 * The plain-Java reference of causal attention with BF16 operands ({@link io.accel4j.core.ops.AttentionOps}' BF16
 * rounding points), in float64 between the roundings; shapes as {@link AttentionRef}. The softmax shift m is the
 * row's final maximum (a tiled kernel rounds {@code exp(s − m)} with its running maximum instead: see the contract).
 * <pre>
 *   q̃, k̃, ṽ = bf16(q, k, v);  s = scale·q̃·k̃;  m = max_u s;  p = exp(s − m);  l = Σ_u p
 *   out = bf16(Σ_u bf16(p)·ṽ / l);  lse = m + log l
 *   backward: D = Σ bf16(dout)·bf16(out);  p = exp(s − lse);  dp = bf16(dout)·ṽ;  ds = p·(dp − D)
 *   dqkv += bf16(scale·Σ_u bf16(ds)·k̃), bf16(scale·Σ_t bf16(ds)·q̃), bf16(Σ_t bf16(p)·bf16(dout))
 * </pre>
 * A float64 value is rounded to bf16 through fp32 (two roundings: a tie created by the first is ≤ 2⁻²⁴ relative
 * away, below what any test resolves).
 */
public final class AttentionBf16Ref {

    private AttentionBf16Ref() {}

    /** {@code bf16(x)} as a double: x rounded to fp32, then to bf16, nearest-even. */
    public static double bf16(double x) {
        return Bf16.toFloat(Bf16.fromFloat((float) x));
    }

    /** Writes {@code out (B,T,C)} (bf16 values) and {@code lse (B,NH,T)} from {@code qkv (B,T,3C)}. */
    public static void forward(double[] out, double[] lse, double[] qkv, int B, int T, int C, int NH) {
        int hs = C / NH;
        double scale = 1.0 / Math.sqrt(hs);
        double[] q = rounded(qkv);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    double[] s = scores(q, b, h, t, T, C, hs, scale);
                    double m = Double.NEGATIVE_INFINITY;
                    for (double x : s) {
                        m = Math.max(m, x);
                    }
                    double l = 0;
                    double[] o = new double[hs];
                    for (int u = 0; u <= t; u++) {
                        double p = Math.exp(s[u] - m);
                        l += p;
                        int v = row(b, u, T, C) + 2 * C + h * hs;
                        for (int i = 0; i < hs; i++) {
                            o[i] += bf16(p) * q[v + i];
                        }
                    }
                    lse[(b * NH + h) * T + t] = m + Math.log(l);
                    for (int i = 0; i < hs; i++) {
                        out[(b * T + t) * C + h * hs + i] = bf16(o[i] / l);
                    }
                }
            }
        }
    }

    /** {@code dqkv (B,T,3C) +=} the BF16-operand gradient of {@code Σ dout·out}, given the forward's out and lse. */
    public static void backward(double[] dqkv, double[] dout, double[] qkv, double[] out, double[] lse,
                                int B, int T, int C, int NH) {
        int hs = C / NH;
        double scale = 1.0 / Math.sqrt(hs);
        double[] q = rounded(qkv), g = rounded(dout), o = rounded(out);
        double[] grad = new double[3 * C * T]; // one (b, h)'s dQ, dK, dV in qkv's row layout
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                java.util.Arrays.fill(grad, 0);
                for (int t = 0; t < T; t++) {
                    double[] s = scores(q, b, h, t, T, C, hs, scale);
                    int dt = (b * T + t) * C + h * hs, qt = row(b, t, T, C) + h * hs;
                    double D = 0;
                    for (int i = 0; i < hs; i++) {
                        D += g[dt + i] * o[dt + i];
                    }
                    for (int u = 0; u <= t; u++) {
                        int ku = row(b, u, T, C) + C + h * hs, vu = ku + C;
                        double p = Math.exp(s[u] - lse[(b * NH + h) * T + t]), dp = 0;
                        for (int i = 0; i < hs; i++) {
                            dp += g[dt + i] * q[vu + i];
                        }
                        double ds = bf16(p * (dp - D)), pr = bf16(p);
                        int gq = t * 3 * C + h * hs, gk = u * 3 * C + C + h * hs, gv = gk + C;
                        for (int i = 0; i < hs; i++) {
                            grad[gq + i] += scale * ds * q[ku + i];
                            grad[gk + i] += scale * ds * q[qt + i];
                            grad[gv + i] += pr * g[dt + i];
                        }
                    }
                }
                for (int t = 0; t < T; t++) {
                    for (int part = 0; part < 3; part++) {
                        for (int i = 0; i < hs; i++) {
                            int at = t * 3 * C + part * C + h * hs + i;
                            dqkv[row(b, t, T, C) + part * C + h * hs + i] += bf16(grad[at]);
                        }
                    }
                }
            }
        }
    }

    /** Every element of {@code x} rounded to bf16. */
    private static double[] rounded(double[] x) {
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = bf16(x[i]);
        }
        return r;
    }

    /** {@code s[u] = scale·q_t·k_u} for {@code u ≤ t}. */
    private static double[] scores(double[] qkv, int b, int h, int t, int T, int C, int hs, double scale) {
        double[] s = new double[t + 1];
        int qt = row(b, t, T, C) + h * hs;
        for (int u = 0; u <= t; u++) {
            int ku = row(b, u, T, C) + C + h * hs;
            double dot = 0;
            for (int i = 0; i < hs; i++) {
                dot += qkv[qt + i] * qkv[ku + i];
            }
            s[u] = scale * dot;
        }
        return s;
    }

    /** Index of {@code qkv[b, t, 0]}. */
    private static int row(int b, int t, int T, int C) {
        return (b * T + t) * 3 * C;
    }
}
