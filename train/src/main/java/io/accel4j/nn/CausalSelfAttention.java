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
 *
 * <p>{@link #parallel} is the same module split over the network's tensor group by heads (Megatron-LM): rank r computes
 * the QKV projection of its NH/T heads (a {@link ColumnParallelLinear} of three stacked blocks, Q, K and V each split
 * by heads), flash attention over them, and its partial output projection (a {@link RowParallelLinear}), all-reduced;
 * its parameters are this rank's shards: {@code c_attn.weight (3C/T, C)}, {@code c_attn.bias (3C/T)},
 * {@code c_proj.weight (C, C/T)}, {@code c_proj.bias (C)} (whole). On one rank it computes what the whole module does,
 * with the same parameter names and shapes.
 */
public final class CausalSelfAttention implements Module {

    private final String name;
    private final int C;
    private final int NH;
    private final Module qkv;
    private final Module proj;
    /** Whether the heads are split over the tensor group ({@link #parallel}). */
    private final boolean split;
    /** This rank's channels and heads: C and NH, or C/T and NH/T when split. */
    private int Cs;
    private int NHs;
    private DType operands;
    private ActRef qkvOut;
    private ActRef atty;
    private ActRef lse;
    private ActRef dqkv;
    private ActRef datty;

    public CausalSelfAttention(String name, int C, int NH) {
        this(name, C, NH, false);
    }

    private CausalSelfAttention(String name, int C, int NH, boolean split) {
        if (C < 1 || NH < 1 || C % NH != 0) {
            throw new ShapeException("attention '" + name + "' needs C divisible by NH, got C=" + C + ", NH=" + NH);
        }
        this.name = name;
        this.C = C;
        this.NH = NH;
        this.split = split;
        this.qkv = split ? ColumnParallelLinear.stacked("c_attn", C, 3 * C, 3) : Linear.of("c_attn", C, 3 * C);
        this.proj = split ? new RowParallelLinear("c_proj", C, C) : Linear.of("c_proj", C, C);
    }

    /** The attention of {@code NH} heads over {@code C} channels split over the network's tensor group by heads. */
    public static CausalSelfAttention parallel(String name, int C, int NH) {
        return new CausalSelfAttention(name, C, NH, true);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        TensorParallel tp = b.tensor();
        NHs = split ? tp.split(b.qualified(""), "its heads NH", NH, 1) : NH;
        Cs = split ? C / tp.size() : C;
        operands = b.attentionOperands(Cs, NHs);
        b.child(qkv, C);
        qkvOut = b.activation("qkv", 3L * Cs);
        atty = b.activation("atty", Cs);
        lse = b.statistic("lse", NHs);
        b.child(proj, Cs, true); // its din is this module's datty
        dqkv = b.shared("attention.dqkv", 3L * Cs);
        datty = b.shared("attention.datty", Cs);
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
        p.ops().attentionForward(y, p.act(lse), q, p.B(), p.T(), Cs, NHs, operands);
        proj.forward(p, y, out);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment q = p.act(qkvOut), y = p.act(atty);
        MemorySegment dy = p.zeroed(datty);
        proj.backward(p, y, out, dout, dy);
        MemorySegment dq = p.zeroed(dqkv);
        p.ops().attentionBackward(dq, dy, q, y, p.act(lse), p.B(), p.T(), Cs, NHs, operands);
        qkv.backward(p, in, q, dq, din);
    }
}
