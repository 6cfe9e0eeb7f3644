package io.accel4j.nn;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;

/**
 * Causal multi-head self-attention with a fused QKV projection, as GPT-2: {@code qkv = c_attn(in)} {@code (rows, 3C)},
 * flash attention over NH heads of size C/NH (keeping the output and the per-head log-sum-exp, never T×T scores), then
 * {@code out = c_proj(atty)}. Attention forms its products in BF16 when the matmuls do and the backend takes this head
 * size ({@link Builder#attentionOperands}), else FP32.
 *
 * <p>Parameters: {@code c_attn.weight (3C, C)}, {@code c_attn.bias (3C)}, {@code c_proj.weight (C, C)},
 * {@code c_proj.bias (C)}.
 */
public final class CausalSelfAttention implements Module {

    private final String name;
    private final int C;
    private final int NH;
    private final Linear qkv;
    private final Linear proj;
    private DType operands;
    private ActRef qkvOut;
    private ActRef atty;
    private ActRef lse;
    private ActRef dqkv;
    private ActRef datty;

    public CausalSelfAttention(String name, int C, int NH) {
        if (C < 1 || NH < 1 || C % NH != 0) {
            throw new ShapeException("attention '" + name + "' needs C divisible by NH, got C=" + C + ", NH=" + NH);
        }
        this.name = name;
        this.C = C;
        this.NH = NH;
        this.qkv = Linear.of("c_attn", C, 3 * C);
        this.proj = Linear.of("c_proj", C, C);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        operands = b.attentionOperands(C, NH);
        b.child(qkv, C);
        qkvOut = b.activation("qkv", 3L * C);
        atty = b.activation("atty", C);
        lse = b.activation("lse", NH);
        b.child(proj, C, true); // its din is this module's datty
        dqkv = b.shared("attention.dqkv", 3L * C);
        datty = b.shared("attention.datty", C);
        return C;
    }

    /** The precision attention's products are formed in (decided at build). */
    public DType attentionOperands() {
        return operands;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment q = p.act(qkvOut), y = p.act(atty);
        qkv.forward(p, in, q);
        p.ops().attentionForward(y, p.act(lse), q, p.B(), p.T(), C, NH, operands);
        proj.forward(p, y, out);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment q = p.act(qkvOut), y = p.act(atty);
        MemorySegment dy = p.zeroed(datty);
        proj.backward(p, y, out, dout, dy);
        MemorySegment dq = p.zeroed(dqkv);
        p.ops().attentionBackward(dq, dy, q, y, p.act(lse), p.B(), p.T(), C, NH, operands);
        qkv.backward(p, in, q, dq, din);
    }
}
