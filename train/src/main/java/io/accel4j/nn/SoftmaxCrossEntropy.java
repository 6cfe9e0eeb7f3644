package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * The loss: softmax over the first {@code V} of each position's logits and cross-entropy with its target class,
 * {@code loss[i] = −log softmax(logits[i, 0:V])[target[i]]}, fused with its gradient, which replaces the logits in
 * place ({@link io.accel4j.core.ops.ClassifierOps}). The targets are next tokens for a language model or plain class
 * labels (one position per example, T = 1); logit columns {@code [V, width)} (a padded vocabulary) are ignored and get
 * a zero gradient.
 */
public final class SoftmaxCrossEntropy implements Loss {

    private final int V;

    /** Over {@code V} classes. */
    public SoftmaxCrossEntropy(int V) {
        if (V < 1) {
            throw new ShapeException("the loss needs at least one class, got V=" + V);
        }
        this.V = V;
    }

    /** The number of classes. */
    @Override
    public int classes() {
        return V;
    }

    /** Writes {@code losses (rows)} from {@code logits (rows, width)}; returns their mean. */
    @Override
    public double forward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, int width) {
        return p.ops().classifierForward(losses, logits, targets, p.rows(), V, width);
    }

    /**
     * {@link #forward}, then the logits replaced by {@code dlossScale·(softmax − onehot)}; returns the mean loss.
     */
    @Override
    public double forwardBackward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, int width,
                           float dlossScale) {
        return p.ops().classifierForwardBackward(logits, losses, targets, p.rows(), V, width, dlossScale);
    }
}
