package io.accel4j.core.ops;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;

/**
 * Causal multi-head self-attention over a fused QKV input.
 *
 * <p>{@code qkv (B,T,3C)} holds Q in columns {@code [0,C)}, K in {@code [C,2C)}, V in {@code [2C,3C)}; head h uses
 * columns {@code h·hs … (h+1)·hs} of each block, {@code hs = C/NH}. With {@code scale = 1/√hs}, for every (b, h) and
 * query t: {@code s[t,u] = scale·q_t·k_u} for {@code u ≤ t}, {@code p = softmax_u(s)}, {@code out[b,t,h·hs+i] =
 * Σ_u p[t,u]·v_u[i]}. The saved statistic is {@code lse (B,NH,T) = log Σ_{u≤t} exp(s[t,u])} (natural log, scale
 * included), from which backward recomputes p without storing it.
 *
 * <p><b>Operand precision.</b> Both methods take the precision of the products, {@code operands} (every buffer stays
 * fp32 and the inputs are not modified):
 * <ul>
 *   <li>{@link DType#FP32}: the fp32 values as they are (the methods without the argument).</li>
 *   <li>{@link DType#BF16}: what a tensor-core FlashAttention-2 kernel computes (kernels' attention_bf16.cu), every
 *       rounding to nearest, ties to even, as {@link io.accel4j.core.Bf16#fromFloat}; sums and softmax statistics
 *       fp32. Forward:
 *       <pre>
 *   q̃, k̃, ṽ = bf16(q), bf16(k), bf16(v)
 *   s[t,u]   = scale·q̃_t·k̃_u                          (fp32 sum of exact products)
 *   p[t,u]   = exp(s[t,u] − m_t),  l_t = Σ_u p[t,u]    (m_t a maximum of the s[t,·] seen so far, below)
 *   out[t]   = bf16(Σ_u bf16(p[t,u])·ṽ_u / l_t)        (stored in the fp32 buffer: a bf16 value)
 *   lse[t]   = m_t + log l_t                           (fp32)
 *       </pre>
 *       The normaliser l sums the unrounded p; only the P·V product takes bf16(p). A kernel that visits the keys in
 *       tiles (online softmax) rounds {@code exp(s − m)} with the running maximum m of the tiles so far, rescaling
 *       the sums when m grows, so which p is rounded depends on its tiles: backends agree up to that rounding
 *       (≤ 2⁻⁹ of each probability) and the order of the fp32 sums. Backward, for the loss {@code Σ dout·out}:
 *       <pre>
 *   d̃out, õut = bf16(dout), bf16(out)                 (õut = out for an out the forward wrote)
 *   D_t       = Σ_i d̃out_t[i]·õut_t[i]                (fp32)
 *   p[t,u]    = exp(s[t,u] − lse[t]),  dp[t,u] = d̃out_t·ṽ_u,  ds = p∘(dp − D)     (fp32, s as forward)
 *   dQ_t = scale·Σ_u bf16(ds[t,u])·k̃_u,  dK_u = scale·Σ_t bf16(ds[t,u])·q̃_t,  dV_u = Σ_t bf16(p[t,u])·d̃out_t
 *   dqkv += bf16(dQ), bf16(dK), bf16(dV)              (each whole gradient rounded once, then added in fp32)
 *       </pre></li>
 * </ul>
 * FP16 operands are not offered (the tensor-core kernel is bf16 only): any {@code operands} other than FP32 and BF16
 * is an {@link IllegalArgumentException}. A backend may take BF16 only for some sizes (the GPU: head sizes 64 and
 * 128) or kernels; {@link #checkAttention} says so before a run starts.
 */
public interface AttentionOps {

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)}; FP32 operands. */
    default void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C,
                                  int NH) {
        attentionForward(out, lse, qkv, B, T, C, NH, DType.FP32);
    }

    /**
     * {@code dqkv (B,T,3C) +=} the gradient of {@code Σ dout·out} with respect to qkv, given the forward's
     * {@code out} and {@code lse}; FP32 operands.
     */
    default void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                   MemorySegment lse, int B, int T, int C, int NH) {
        attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH, DType.FP32);
    }

    /**
     * {@link #attentionForward(MemorySegment, MemorySegment, MemorySegment, int, int, int, int)} with products of
     * {@code operands} precision (see the interface comment).
     */
    void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                          DType operands);

    /**
     * {@link #attentionBackward(MemorySegment, MemorySegment, MemorySegment, MemorySegment, MemorySegment, int, int,
     * int, int)} with products of {@code operands} precision (see the interface comment); pass the forward's.
     */
    void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                           MemorySegment lse, int B, int T, int C, int NH, DType operands);

    /**
     * Throws, with a message naming what is missing, unless this backend runs attention with {@code operands} for
     * {@code C} channels in {@code NH} heads: a trainer calls it once before its first step, so that a configuration
     * the backend cannot run fails at start-up. The default checks only the precision ({@link #checkOperands}).
     *
     * @throws IllegalArgumentException       for operands other than FP32/BF16, or sizes the backend cannot take
     * @throws UnsupportedOperationException  when this backend lacks the precision altogether
     */
    default void checkAttention(DType operands, int C, int NH) {
        checkOperands(operands);
    }

    /**
     * The sizes every backend checks first: B, T, C, NH ≥ 1, C divisible by NH, and qkv's {@code B·T·3C} elements
     * countable in a long. Returns the head size {@code hs = C/NH}.
     *
     * @throws IllegalArgumentException naming the size and its value
     */
    static int checkSizes(int B, int T, int C, int NH) {
        OpChecks.positive("B", B);
        OpChecks.positive("T", T);
        OpChecks.positive("C", C);
        OpChecks.positive("NH", NH);
        if (C % NH != 0) {
            throw new IllegalArgumentException("C (" + C + ") must be divisible by NH (" + NH + ")");
        }
        try {
            Math.multiplyExact(Math.multiplyExact((long) B * T, 3L), (long) C);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("qkv's B·T·3C = " + B + "·" + T + "·3·" + C + " elements overflow a long");
        }
        return C / NH;
    }

    /**
     * {@link #attentionForward}'s argument checks, shared by every backend: {@link #checkSizes}, then out holds
     * {@code B·T·C} floats, lse {@code B·NH·T}, qkv {@code B·T·3C}. Returns hs. Thread-sharing and aliasing stay
     * each backend's own checks.
     */
    static int checkForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH) {
        int hs = checkSizes(B, T, C, NH);
        long bt = (long) B * T;
        OpChecks.floats("out", out, bt * C);
        OpChecks.floats("lse", lse, (long) B * NH * T);
        OpChecks.floats("qkv", qkv, bt * 3 * C);
        return hs;
    }

    /**
     * {@link #attentionBackward}'s argument checks, shared by every backend: {@link #checkSizes}, then dqkv and qkv
     * hold {@code B·T·3C} floats, dout and out {@code B·T·C}, lse {@code B·NH·T}. Returns hs.
     */
    static int checkBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                             MemorySegment lse, int B, int T, int C, int NH) {
        int hs = checkSizes(B, T, C, NH);
        long bt = (long) B * T;
        OpChecks.floats("dqkv", dqkv, bt * 3 * C);
        OpChecks.floats("dout", dout, bt * C);
        OpChecks.floats("qkv", qkv, bt * 3 * C);
        OpChecks.floats("out", out, bt * C);
        OpChecks.floats("lse", lse, (long) B * NH * T);
        return hs;
    }

    /**
     * Checks an attention operand precision: returns it when it is FP32 or BF16.
     *
     * @throws IllegalArgumentException for null or any other type (FP16 included: see the interface comment)
     */
    static DType checkOperands(DType operands) {
        if (operands != DType.FP32 && operands != DType.BF16) {
            throw new IllegalArgumentException("attention operands must be FP32 or BF16, got " + operands);
        }
        return operands;
    }
}
