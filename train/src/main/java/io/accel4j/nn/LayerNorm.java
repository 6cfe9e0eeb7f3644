package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Layer normalisation over each position's C values: {@code out = (x − mean)·rstd·weight + bias}, ε = 1e-5; keeps
 * {@code mean} and {@code rstd} (one float per position each) for backward.
 *
 * <p>Parameters: {@code weight (C)} (the gain), {@code bias (C)}; neither weight-decayed.
 */
public final class LayerNorm implements Module {

    private final String name;
    private final int C;
    private ParamRef weight;
    private ParamRef bias;
    private ActRef mean;
    private ActRef rstd;
    private ActRef discard;

    public LayerNorm(String name, int C) {
        if (C < 1) {
            throw new ShapeException("layernorm '" + name + "' needs C >= 1, got " + C);
        }
        this.name = name;
        this.C = C;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        weight = b.parameter("weight", false, Init.ones(), C);
        bias = b.parameter("bias", false, Init.zeros(), C);
        mean = b.statistic("mean", 1);
        rstd = b.statistic("rstd", 1);
        discard = b.inputGradient() ? null : b.shared("layernorm.discarded-dinp", C);
        return C;
    }

    /** The gain {@code (C)}. */
    public ParamRef weight() {
        return weight;
    }

    /** The bias {@code (C)}. */
    public ParamRef bias() {
        return bias;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        p.ops().layernormForward(out, p.act(mean), p.act(rstd), in, p.param(weight), p.param(bias), p.rows(), C);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        p.ops().layernormBackward(din != null ? din : p.zeroed(discard), p.grad(weight), p.grad(bias), dout, in,
                p.param(weight), p.act(mean), p.act(rstd), p.rows(), C);
    }
}
