package io.accel4j.kernels;

/**
 * Multi-head self-attention with an optional causal mask, in float64 plain loops: the reference of the non-causal
 * bf16 kernels (vector-cpu's {@link io.accel4j.cpu.ref.AttentionRef} is causal only; {@code AttentionBf16EmuTest}
 * checks that the causal mode here agrees with it). Same shapes and math as AttentionRef, with u running over every
 * key when not causal:
 * <pre>
 *   s[t,u] = scale·q_t·k_u,  lse[t] = log Σ_u exp(s[t,u]),  p = exp(s − lse),  out[t] = Σ_u p[t,u]·v_u
 *   dp[t,u] = dout_t·v_u,  ds = p∘(dp − Σ_w p[t,w]·dp[t,w]),
 *   dq_t += scale·Σ_u ds[t,u]·k_u,  dk_u += scale·Σ_t ds[t,u]·q_t,  dv_u += Σ_t p[t,u]·dout_t
 * </pre>
 */
final class FullAttentionRef {

    private FullAttentionRef() {}

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)}; {@code dqkv (B,T,3C) +=} the gradient of Σ dout·out. */
    static void forwardBackward(double[] out, double[] lse, double[] dqkv, double[] qkv, double[] dout,
                                int B, int T, int C, int NH, boolean causal) {
        int hs = C / NH;
        double scale = 1.0 / Math.sqrt(hs);
        double[] s = new double[T], p = new double[T], dp = new double[T];
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    int keys = causal ? t + 1 : T;
                    int q = (b * T + t) * 3 * C + h * hs, o = (b * T + t) * C + h * hs;
                    double max = Double.NEGATIVE_INFINITY;
                    for (int u = 0; u < keys; u++) {
                        int k = (b * T + u) * 3 * C + C + h * hs;
                        double dot = 0;
                        for (int i = 0; i < hs; i++) {
                            dot += qkv[q + i] * qkv[k + i];
                        }
                        s[u] = scale * dot;
                        max = Math.max(max, s[u]);
                    }
                    double sum = 0;
                    for (int u = 0; u < keys; u++) {
                        sum += Math.exp(s[u] - max);
                    }
                    double l = max + Math.log(sum);
                    lse[(b * NH + h) * T + t] = l;
                    double pdp = 0;
                    for (int u = 0; u < keys; u++) {
                        int v = (b * T + u) * 3 * C + 2 * C + h * hs;
                        p[u] = Math.exp(s[u] - l);
                        dp[u] = 0;
                        for (int i = 0; i < hs; i++) {
                            dp[u] += dout[o + i] * qkv[v + i];
                        }
                        pdp += p[u] * dp[u];
                    }
                    for (int i = 0; i < hs; i++) {
                        double acc = 0;
                        for (int u = 0; u < keys; u++) {
                            acc += p[u] * qkv[(b * T + u) * 3 * C + 2 * C + h * hs + i];
                        }
                        out[o + i] = acc;
                    }
                    for (int u = 0; u < keys; u++) {
                        double ds = p[u] * (dp[u] - pdp);
                        int k = (b * T + u) * 3 * C + C + h * hs, v = k + C;
                        for (int i = 0; i < hs; i++) {
                            dqkv[q + i] += scale * ds * qkv[k + i];
                            dqkv[k + i] += scale * ds * qkv[q + i];
                            dqkv[v + i] += p[u] * dout[o + i];
                        }
                    }
                }
            }
        }
    }
}
