package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * The language-model head: logits {@code (rows, Vp) = in (rows, C) · Wᵀ}, no bias. Tied ({@link #tied}): W is the token
 * embedding's table, whose gradient then gathers both uses; untied ({@link #untied}): a weight of its own,
 * {@code weight (Vp, C)}, weight-decayed.
 */
public final class LmHead implements Module {

    private final String name;
    private final Embedding tiedTo;
    private int C;
    private int Vp;
    private ParamRef weight;
    private ActRef discard;

    private LmHead(String name, Embedding tiedTo, int C, int Vp) {
        this.name = name;
        this.tiedTo = tiedTo;
        this.C = C;
        this.Vp = Vp;
    }

    /** A head whose weight is {@code embedding}'s token table (the embedding comes first in the tree). */
    public static LmHead tied(String name, Embedding embedding) {
        return new LmHead(name, java.util.Objects.requireNonNull(embedding, "embedding"), -1, -1);
    }

    /** A head with its own {@code (Vp, C)} weight. */
    public static LmHead untied(String name, int C, int Vp) {
        if (C < 1 || Vp < 1) {
            throw new ShapeException("LM head '" + name + "' needs C, Vp >= 1, got " + C + ", " + Vp);
        }
        return new LmHead(name, null, C, Vp);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        if (tiedTo != null) {
            if (tiedTo.wte() == null) {
                throw new ShapeException("LM head '" + b.qualified("") + "' is tied to embedding '" + tiedTo.name()
                        + "', which is not built yet: put the embedding before the head");
            }
            weight = b.own(tiedTo.wte());
            long[] shape = b.shape(weight);
            b.expectWidth(inWidth, shape[1]);
            C = Math.toIntExact(shape[1]);
            Vp = Math.toIntExact(shape[0]);
        } else {
            b.expectWidth(inWidth, C);
            weight = b.parameter("weight", true, Init.fanIn(C), Vp, C);
        }
        discard = b.inputGradient() ? null : b.shared("linear.discarded-dinp", C);
        return Vp;
    }

    /** The head's weight (the embedding's table when tied). */
    public ParamRef weight() {
        return weight;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        p.ops().matmulForward(out, in, p.param(weight), null, p.rows(), C, Vp, p.matmulOperands());
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        p.ops().matmulBackward(din != null ? din : p.act(discard), p.grad(weight), null, dout, in, p.param(weight),
                p.rows(), C, Vp, p.matmulOperands());
    }
}
