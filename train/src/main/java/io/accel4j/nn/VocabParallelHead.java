package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * The language-model head split by vocabulary over a tensor group (Megatron-LM): rank r's logits are its columns,
 * {@code (rows, Vp/T) = in (rows, C) · W_rᵀ}, and the network's loss becomes {@link VocabParallelCrossEntropy}, so
 * the whole logits are never formed on one rank. The input is the same on every rank; in backward the partial input
 * gradients are all-reduced. Tied ({@link #tied}): W_r is the {@link VocabParallelEmbedding}'s shard; untied: a
 * weight of its own, {@code weight (Vp/T, C)}, weight-decayed.
 */
public final class VocabParallelHead implements Module {

    private final String name;
    private final VocabParallelEmbedding tiedTo;
    private int C;
    private final int Vp;
    private TensorParallel tp;
    private int Vs;
    private ParamRef weight;
    private ActRef dinp;

    private VocabParallelHead(String name, VocabParallelEmbedding tiedTo, int C, int Vp) {
        this.name = name;
        this.tiedTo = tiedTo;
        this.C = C;
        this.Vp = Vp;
    }

    /** A head whose weight is {@code embedding}'s token table shard (the embedding comes first in the tree). */
    public static VocabParallelHead tied(String name, VocabParallelEmbedding embedding) {
        return new VocabParallelHead(name, java.util.Objects.requireNonNull(embedding, "embedding"), -1, -1);
    }

    /** A head with its own weight, split by vocabulary. */
    public static VocabParallelHead untied(String name, int C, int Vp) {
        if (C < 1 || Vp < 1) {
            throw new ShapeException("LM head '" + name + "' needs C, Vp >= 1, got " + C + ", " + Vp);
        }
        return new VocabParallelHead(name, null, C, Vp);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        tp = b.tensor();
        if (tiedTo != null) {
            if (tiedTo.wte() == null) {
                throw new ShapeException("LM head '" + b.qualified("") + "' is tied to embedding '" + tiedTo.name()
                        + "', which is not built yet: put the embedding before the head");
            }
            weight = b.own(tiedTo.wte());
            long[] shape = b.shape(weight);
            b.expectWidth(inWidth, shape[1]);
            C = Math.toIntExact(shape[1]);
            Vs = Math.toIntExact(shape[0]);
        } else {
            b.expectWidth(inWidth, C);
            Vs = tp.split(b.qualified(""), "the padded vocabulary Vp", Vp, 1);
            weight = b.shardedParameter("weight", true, Init.fanIn(C), Sharding.rows(1), Vs, C);
        }
        dinp = b.shared("parallel.dinp", C);
        b.vocabShardOutput();
        return Vs;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        p.ops().matmulForward(out, in, p.param(weight), null, p.rows(), C, Vs, p.matmulOperands());
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment d = p.zeroed(dinp);
        p.ops().matmulBackward(d, p.grad(weight), null, dout, in, p.param(weight), p.rows(), C, Vs,
                p.matmulOperands());
        if (din != null) {
            long n = (long) p.rows() * C;
            tp.sum(d, n);
            p.ops().residualForward(din, din, d, n);
        }
    }
}
