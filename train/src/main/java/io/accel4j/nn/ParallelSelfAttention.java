package io.accel4j.nn;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;

/**
 * {@link CausalSelfAttention} split over a tensor group by heads (Megatron-LM): rank r computes the QKV projection of
 * its NH/T heads (a {@link ColumnParallelLinear} of three stacked blocks, Q, K and V each split by heads), flash
 * attention over them, and its partial output projection (a {@link RowParallelLinear}), all-reduced. One rank: the
 * same computation as {@link CausalSelfAttention}, with the same parameter names and shapes.
 *
 * <p>Parameters (this rank's shards): {@code c_attn.weight (3C/T, C)}, {@code c_attn.bias (3C/T)},
 * {@code c_proj.weight (C, C/T)}, {@code c_proj.bias (C)} (whole).
 */
public final class ParallelSelfAttention implements Module {

    private final String name;
    private final int C;
    private final int NH;
    private final ColumnParallelLinear qkv;
    private final RowParallelLinear proj;
    private int Cs;
    private int NHs;
    private DType operands;
    private ActRef qkvOut;
    private ActRef atty;
    private ActRef lse;
    private ActRef dqkv;
    private ActRef datty;

    public ParallelSelfAttention(String name, int C, int NH) {
        if (C < 1 || NH < 1 || C % NH != 0) {
            throw new ShapeException("attention '" + name + "' needs C divisible by NH, got C=" + C + ", NH=" + NH);
        }
        this.name = name;
        this.C = C;
        this.NH = NH;
        this.qkv = ColumnParallelLinear.stacked("c_attn", C, 3 * C, 3);
        this.proj = new RowParallelLinear("c_proj", C, C);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        TensorParallel tp = b.tensor();
        NHs = tp.split(b.qualified(""), "its heads NH", NH, 1);
        Cs = C / tp.size();
        operands = b.attentionOperands(Cs, NHs);
        b.child(qkv, C);
        qkvOut = b.activation("qkv", 3L * Cs);
        atty = b.activation("atty", Cs);
        lse = b.activation("lse", NHs);
        b.child(proj, Cs, true);
        dqkv = b.shared("attention.dqkv", 3L * Cs);
        datty = b.shared("attention.datty", Cs);
        return C;
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
