package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Megatron-LM's column-parallel linear layer: {@code out (rows, OC/T) = in (rows, C) · W_rᵀ + b_r}, rank r holding
 * its slice of the output features (rows of the weight; with {@code blocks} > 1 its slice of each of that many
 * stacked blocks, as a fused QKV weight is split by heads), optionally with the GELU fused into the GEMM epilogue. The
 * input is the same on every rank; in backward the ranks' partial input gradients are all-reduced (the conjugate of
 * the forward's copy) before they are added into {@code din}. Products in the network's matmul precision (no FP8).
 *
 * <p>Parameters (this rank's shards): {@code weight (OC/T, C)}, {@code bias (OC/T)}, drawn as the whole layer's.
 */
public final class ColumnParallelLinear implements Module {

    private final String name;
    private final int C;
    private final int OC;
    private final int blocks;
    private final boolean gelu;
    private TensorParallel tp;
    private int OCs;
    private ParamRef weight;
    private ParamRef bias;
    private ActRef pre;
    private ActRef dpre;
    private ActRef dinp;

    private ColumnParallelLinear(String name, int C, int OC, int blocks, boolean gelu) {
        if (C < 1 || OC < 1) {
            throw new ShapeException("linear '" + name + "' needs in and out features >= 1, got " + C + " -> " + OC);
        }
        this.name = name;
        this.C = C;
        this.OC = OC;
        this.blocks = blocks;
        this.gelu = gelu;
    }

    /** {@code in → out} features with a bias, the outputs split over the tensor group. */
    public static ColumnParallelLinear of(String name, int in, int out) {
        return new ColumnParallelLinear(name, in, out, 1, false);
    }

    /** Out features in {@code blocks} stacked blocks, each split alike (a fused QKV projection: 3). */
    public static ColumnParallelLinear stacked(String name, int in, int out, int blocks) {
        return new ColumnParallelLinear(name, in, out, blocks, false);
    }

    /** {@code gelu(in·Wᵀ + b)}, the GELU fused into the GEMM's epilogue. */
    public static ColumnParallelLinear gelu(String name, int in, int out) {
        return new ColumnParallelLinear(name, in, out, 1, true);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        if (b.fp8()) {
            throw new ShapeException("module '" + b.qualified("") + "': tensor-parallel layers have no FP8 path");
        }
        tp = b.tensor();
        OCs = tp.split(b.qualified(""), "its out features", OC, blocks);
        Sharding rows = Sharding.rows(blocks);
        weight = b.shardedParameter("weight", true, Init.fanIn(C), rows, OCs, C);
        bias = b.shardedParameter("bias", false, Init.fanIn(C), rows, OCs);
        if (gelu) {
            pre = b.activation("pre", OCs);
            dpre = b.shared("linear.dpre", OCs);
        }
        dinp = b.shared("parallel.dinp", C);
        return OCs;
    }

    /** This rank's out features, OC/T. */
    public int localOut() {
        return OCs;
    }

    ParamRef weight() {
        return weight;
    }

    ParamRef bias() {
        return bias;
    }

    ActRef pre() {
        return pre;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        if (gelu) {
            p.ops().matmulForwardGelu(out, p.act(pre), in, p.param(weight), p.param(bias), p.rows(), C, OCs,
                    p.matmulOperands());
        } else {
            p.ops().matmulForward(out, in, p.param(weight), p.param(bias), p.rows(), C, OCs, p.matmulOperands());
        }
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment g = dout;
        if (gelu) {
            g = p.zeroed(dpre);
            p.ops().geluBackward(g, p.act(pre), dout, (long) p.rows() * OCs);
        }
        backwardOf(p, in, g, din, p.grad(bias));
    }

    /**
     * The linear part's backward of {@code dpre} (the GELU already undone): {@code dW += dpreᵀ·in},
     * {@code dbias += Σ dpre} (unless null), and {@code din += Σ_ranks dpre·W_r} (unless {@code din} is null).
     */
    void backwardOf(Pass p, MemorySegment in, MemorySegment dpre, MemorySegment din, MemorySegment dbias) {
        MemorySegment d = p.zeroed(dinp);
        p.ops().matmulBackward(d, p.grad(weight), dbias, dpre, in, p.param(weight), p.rows(), C, OCs,
                p.matmulOperands());
        if (din != null) {
            long n = (long) p.rows() * C;
            tp.sum(d, n);
            p.ops().residualForward(din, din, d, n);
        }
    }
}
