package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/**
 * Causal multi-head self-attention over a fused QKV input.
 *
 * <p>{@code qkv (B,T,3C)} holds Q in columns {@code [0,C)}, K in {@code [C,2C)}, V in {@code [2C,3C)}; head h uses
 * columns {@code h·hs … (h+1)·hs} of each block, {@code hs = C/NH}. With {@code scale = 1/√hs}, for every (b, h) and
 * query t: {@code s[t,u] = scale·q_t·k_u} for {@code u ≤ t}, {@code p = softmax_u(s)}, {@code out[b,t,h·hs+i] =
 * Σ_u p[t,u]·v_u[i]}. The saved statistic is {@code lse (B,NH,T) = log Σ_{u≤t} exp(s[t,u])} (natural log, scale
 * included), from which backward recomputes p without storing it.
 */
public interface AttentionOps {

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)}. */
    void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH);

    /**
     * {@code dqkv (B,T,3C) +=} the gradient of {@code Σ dout·out} with respect to qkv, given the forward's
     * {@code out} and {@code lse}.
     */
    void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                           MemorySegment lse, int B, int T, int C, int NH);
}
