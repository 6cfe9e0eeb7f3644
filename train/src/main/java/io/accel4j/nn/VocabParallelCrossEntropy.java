package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Softmax cross-entropy over logits split by vocabulary over a tensor-parallel group (Megatron-LM's vocab-parallel
 * loss): rank r holds columns {@code [r·Vs, (r+1)·Vs)} of the padded logits, classes {@code [V0, V0 + Vv)} of them
 * real. Each position's maximum is all-reduced (MAX), then its sum of exponentials and its target's logit (SUM, the
 * target's logit from the one rank that holds it), and each rank forms the same loss and the gradient of its own
 * columns, in place: the full logits are never gathered. The local halves are the backend's
 * ({@link io.accel4j.core.ops.VocabParallelOps}).
 */
final class VocabParallelCrossEntropy implements Loss {

    private final int V;
    private final TensorParallel tp;
    private final int Vs;
    private final int V0;
    private final int Vv;
    private final ActRef max;
    private final ActRef sums;

    VocabParallelCrossEntropy(Builder b, int V, int Vs) {
        if (V < 1) {
            throw new ShapeException("the loss needs at least one class, got V=" + V);
        }
        this.V = V;
        this.tp = b.tensor();
        this.Vs = Vs;
        if ((long) Vs * tp.size() < V) {
            throw new ShapeException("the network outputs " + Vs + " values per position on each of " + tp.size()
                    + " tensor ranks, the loss is over " + V + " classes");
        }
        this.V0 = tp.rank() * Vs;
        this.Vv = Math.max(0, Math.min(Vs, V - V0));
        this.max = b.activation("loss.max", 1);
        this.sums = b.activation("loss.sums", 2);
    }

    @Override
    public int classes() {
        return V;
    }

    @Override
    public double forward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, int width) {
        return run(p, losses, logits, targets, 0f, false);
    }

    @Override
    public double forwardBackward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                  int width, float dlossScale) {
        return run(p, losses, logits, targets, dlossScale, true);
    }

    private double run(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, float scale,
                       boolean backward) {
        int n = p.rows();
        MemorySegment m = p.act(max), s = p.act(sums);
        p.ops().classifierShardMax(m, logits, n, Vv, Vs);
        tp.max(m, n);
        p.ops().classifierShardSums(s, logits, m, targets, n, V0, Vv, Vs);
        tp.sum(s, 2L * n);
        return p.ops().classifierShardLoss(losses, logits, m, s, targets, n, V0, Vv, Vs, scale, backward);
    }
}
