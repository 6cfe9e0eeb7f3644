package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Megatron-LM's row-parallel linear layer: rank r holds the columns of the weight that meet its slice of the input
 * features ({@code in (rows, C/T)}, a column-parallel layer's output), computes the partial product, and the partial
 * sums are all-reduced over the tensor group; the bias, whole on every rank, is added once (by rank 0's partial
 * sum). In backward the input gradient stays this rank's slice (no communication) and every rank adds the same bias
 * gradient, so the replicated bias stays the same everywhere.
 *
 * <p>Parameters: {@code weight (OC, C/T)} (this rank's columns), {@code bias (OC)} (whole), drawn as the whole layer's.
 */
public final class RowParallelLinear implements Module {

    private final String name;
    private final int C;
    private final int OC;
    private TensorParallel tp;
    private int Cs;
    private ParamRef weight;
    private ParamRef bias;
    private ActRef discard;

    public RowParallelLinear(String name, int in, int out) {
        if (in < 1 || out < 1) {
            throw new ShapeException("linear '" + name + "' needs in and out features >= 1, got " + in + " -> " + out);
        }
        this.name = name;
        this.C = in;
        this.OC = out;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        if (b.fp8()) {
            throw new ShapeException("module '" + b.qualified("") + "': tensor-parallel layers have no FP8 path");
        }
        tp = b.tensor();
        Cs = tp.split(b.qualified(""), "its in features", C, 1);
        b.expectWidth(inWidth, Cs);
        weight = b.shardedParameter("weight", true, Init.fanIn(C), Sharding.COLUMNS, OC, Cs);
        bias = b.parameter("bias", false, Init.fanIn(C), OC);
        discard = b.inputGradient() ? null : b.shared("linear.discarded-dinp", Cs);
        return OC;
    }

    ParamRef weight() {
        return weight;
    }

    ParamRef bias() {
        return bias;
    }

    /** This rank's in features, C/T. */
    int localIn() {
        return Cs;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment b = tp.rank() == 0 ? p.param(bias) : null;
        p.ops().matmulForward(out, in, p.param(weight), b, p.rows(), Cs, OC, p.matmulOperands());
        tp.sum(out, (long) p.rows() * OC);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        p.ops().matmulBackward(din != null ? din : p.act(discard), p.grad(weight), p.grad(bias), dout, in,
                p.param(weight), p.rows(), Cs, OC, p.matmulOperands());
    }
}
