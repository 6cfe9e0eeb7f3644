package io.accel4j.cpu.ref;

/**
 * The plain-Java reference of causal multi-head self-attention ({@link io.accel4j.core.ops.AttentionOps}), in
 * float64: obviously correct loops that materialise the T×T scores of every (b, h).
 *
 * <p>Shapes: {@code qkv (B,T,3C)} with Q, K, V in column blocks {@code [0,C)}, {@code [C,2C)}, {@code [2C,3C)};
 * head h uses columns {@code h·hs … (h+1)·hs} of each block, {@code hs = C/NH}; {@code out (B,T,C)};
 * {@code lse (B,NH,T)}. With {@code scale = 1/√hs}:
 * <pre>
 *   s[t,u]   = scale·q_t·k_u                 u ≤ t
 *   lse[t]   = log Σ_{u≤t} exp(s[t,u])
 *   p[t,u]   = exp(s[t,u] − lse[t])
 *   out[t,i] = Σ_{u≤t} p[t,u]·v_u[i]
 * </pre>
 * Backward, for the loss {@code Σ dout·out}: {@code dp[t,u] = dout_t·v_u}, {@code ds[t,u] = p[t,u]·(dp[t,u] −
 * Σ_w p[t,w]·dp[t,w])}, {@code dq_t += scale·Σ_u ds[t,u]·k_u}, {@code dk_u += scale·Σ_t ds[t,u]·q_t},
 * {@code dv_u += Σ_t p[t,u]·dout_t}.
 */
public final class AttentionRef {

    private AttentionRef() {}

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)} from {@code qkv (B,T,3C)}. */
    public static void forward(double[] out, double[] lse, double[] qkv, int B, int T, int C, int NH) {
        int hs = C / NH;
        double scale = 1.0 / Math.sqrt(hs);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                double[][] s = scores(qkv, b, h, T, C, hs, scale);
                for (int t = 0; t < T; t++) {
                    double max = Double.NEGATIVE_INFINITY;
                    for (int u = 0; u <= t; u++) {
                        max = Math.max(max, s[t][u]);
                    }
                    double sum = 0;
                    for (int u = 0; u <= t; u++) {
                        sum += Math.exp(s[t][u] - max);
                    }
                    double l = max + Math.log(sum);
                    lse[(b * NH + h) * T + t] = l;
                    for (int i = 0; i < hs; i++) {
                        double o = 0;
                        for (int u = 0; u <= t; u++) {
                            o += Math.exp(s[t][u] - l) * qkv[row(b, u, T, C) + 2 * C + h * hs + i];
                        }
                        out[(b * T + t) * C + h * hs + i] = o;
                    }
                }
            }
        }
    }

    /**
     * {@code dqkv (B,T,3C) +=} the gradient of {@code Σ dout·out}; p is recomputed from {@code qkv} and {@code lse}.
     * {@code out} is not read (the reference recomputes everything else); it is taken for the contract's signature.
     */
    public static void backward(double[] dqkv, double[] dout, double[] qkv, double[] out, double[] lse,
                                int B, int T, int C, int NH) {
        int hs = C / NH;
        double scale = 1.0 / Math.sqrt(hs);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                double[][] s = scores(qkv, b, h, T, C, hs, scale);
                for (int t = 0; t < T; t++) {
                    double l = lse[(b * NH + h) * T + t];
                    int dt = (b * T + t) * C + h * hs;
                    double[] p = new double[t + 1];
                    double[] dp = new double[t + 1];
                    double pdp = 0;
                    for (int u = 0; u <= t; u++) {
                        p[u] = Math.exp(s[t][u] - l);
                        for (int i = 0; i < hs; i++) {
                            dp[u] += dout[dt + i] * qkv[row(b, u, T, C) + 2 * C + h * hs + i];
                        }
                        pdp += p[u] * dp[u];
                    }
                    for (int u = 0; u <= t; u++) {
                        double ds = p[u] * (dp[u] - pdp);
                        int qt = row(b, t, T, C) + h * hs;
                        int ku = row(b, u, T, C) + C + h * hs;
                        int vu = row(b, u, T, C) + 2 * C + h * hs;
                        for (int i = 0; i < hs; i++) {
                            dqkv[qt + i] += scale * ds * qkv[ku + i];
                            dqkv[ku + i] += scale * ds * qkv[qt + i];
                            dqkv[vu + i] += p[u] * dout[dt + i];
                        }
                    }
                }
            }
        }
    }

    /** {@code s[t][u] = scale·q_t·k_u} for {@code u ≤ t} (the rest of each row is left 0 and never read). */
    private static double[][] scores(double[] qkv, int b, int h, int T, int C, int hs, double scale) {
        double[][] s = new double[T][T];
        for (int t = 0; t < T; t++) {
            for (int u = 0; u <= t; u++) {
                double dot = 0;
                for (int i = 0; i < hs; i++) {
                    dot += qkv[row(b, t, T, C) + h * hs + i] * qkv[row(b, u, T, C) + C + h * hs + i];
                }
                s[t][u] = scale * dot;
            }
        }
        return s;
    }

    /** Index of {@code qkv[b, t, 0]}. */
    private static int row(int b, int t, int T, int C) {
        return (b * T + t) * 3 * C;
    }
}
