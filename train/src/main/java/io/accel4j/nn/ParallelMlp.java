package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * {@link Mlp} split over a tensor group (Megatron-LM): the up-projection column-parallel with its GELU fused
 * ({@link ColumnParallelLinear#gelu}), the down-projection row-parallel ({@link RowParallelLinear}, partial sums
 * all-reduced), the GELU's backward fused into the down-projection's GEMM backward as {@link Mlp} does. No GELU
 * recompute (the hidden activation, a T-th of the whole, is kept).
 *
 * <p>Parameters (this rank's shards): {@code c_fc.weight (hidden/T, C)}, {@code c_fc.bias (hidden/T)},
 * {@code c_proj.weight (C, hidden/T)}, {@code c_proj.bias (C)} (whole).
 */
public final class ParallelMlp implements Module {

    private final String name;
    private final int C;
    private final int hidden;
    private final ColumnParallelLinear fc;
    private final RowParallelLinear proj;
    private int Hs;
    private ActRef gelu;
    private ActRef dpre;

    public ParallelMlp(String name, int C, int hidden) {
        this.name = name;
        this.C = C;
        this.hidden = hidden;
        this.fc = ColumnParallelLinear.gelu("c_fc", C, hidden);
        this.proj = new RowParallelLinear("c_proj", hidden, C);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        Hs = b.child(fc, C);
        gelu = b.activation("gelu", Hs);
        b.child(proj, Hs, true);
        dpre = b.shared("mlp.dpre", Hs);
        return C;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment h = p.act(gelu);
        fc.forward(p, in, h);
        proj.forward(p, h, out);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment h = p.act(gelu), pre = p.act(fc.pre());
        MemorySegment g = p.act(dpre); // written by the fused call, not added to
        p.ops().matmulBackwardGelu(g, p.grad(fc.bias()), p.grad(proj.weight()), p.grad(proj.bias()), dout, h, pre,
                p.param(proj.weight()), p.rows(), Hs, C, p.matmulOperands());
        fc.backwardOf(p, in, g, din, null); // its bias gradient came with the fused call
    }
}
