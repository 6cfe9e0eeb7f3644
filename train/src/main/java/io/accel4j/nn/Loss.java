package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * The network's loss over its output: softmax cross-entropy over whole logits ({@link SoftmaxCrossEntropy}), or
 * over this rank's vocabulary shard of them ({@link VocabParallelCrossEntropy}, when the tree ends in a
 * vocab-parallel head). Chosen once by {@link #of}, which also declares its scratch.
 */
interface Loss {

    /** The loss's classes. */
    int classes();

    /** Writes {@code losses (rows)} from {@code logits (rows, width)}; returns their mean. */
    double forward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, int width);

    /** {@link #forward}, then the logits replaced by {@code dlossScale·(softmax − onehot)}; returns the mean loss. */
    double forwardBackward(Pass p, MemorySegment losses, MemorySegment logits, MemorySegment targets, int width,
                           float dlossScale);

    /**
     * The loss of a tree built by {@code b} whose output has {@code outWidth} values per position, over
     * {@code classes} classes.
     *
     * @throws ShapeException when the output cannot hold the classes
     */
    static Loss of(Builder b, int outWidth, int classes) {
        if (b.isVocabShardOutput()) {
            return new VocabParallelCrossEntropy(b, classes, outWidth);
        }
        if (outWidth < classes) {
            throw new ShapeException("the network outputs " + outWidth + " values per position, the loss is over "
                    + classes + " classes");
        }
        return new SoftmaxCrossEntropy(classes);
    }
}
