package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/**
 * Softmax plus cross-entropy over the vocabulary, fused with its gradient. Logits are {@code (N, Vp)}; only columns
 * {@code [0, V)} take part, the padding {@code [V, Vp)} is ignored. Targets are int32 in {@code [0, V)}.
 */
public interface ClassifierOps {

    /**
     * {@code losses[i] (N) = −log softmax(logits[i, 0:V])[targets[i]]}; logits are only read.
     *
     * @return the mean of the N losses (accumulated in float64)
     */
    double classifierForward(MemorySegment losses, MemorySegment logits, MemorySegment targets, int N, int V, int Vp);

    /**
     * The forward above, then, <b>in place</b>, {@code logits[i, 0:V] ← dlossScale·(softmax(logits[i, 0:V]) −
     * onehot(targets[i]))} and {@code logits[i, V:Vp] ← 0}; the probabilities are never stored apart. The gradient of
     * the mean loss over N positions is {@code dlossScale = 1/N}; a trainer folds gradient accumulation or loss
     * scaling into it.
     *
     * @return the mean of the N losses (accumulated in float64)
     */
    double classifierForwardBackward(MemorySegment logits, MemorySegment losses, MemorySegment targets,
                                     int N, int V, int Vp, float dlossScale);

    /**
     * The classifier's argument checks, shared by every backend (forward and forward-backward): N, V ≥ 1, Vp ≥ V;
     * losses (N) floats, logits (N·Vp) floats, targets (N) ints. The targets' range and {@code dlossScale} are
     * each backend's to check where it reads them.
     */
    static void checkSizes(MemorySegment losses, MemorySegment logits, MemorySegment targets, int N, int V, int Vp) {
        OpChecks.positive("N", N);
        OpChecks.positive("V", V);
        if (Vp < V) {
            throw new IllegalArgumentException("Vp (the padded row length) must be >= V, got Vp " + Vp + " < V " + V);
        }
        OpChecks.floats("losses", losses, N);
        OpChecks.floats("logits", logits, (long) N * Vp);
        OpChecks.ints("targets", targets, N);
    }
}
