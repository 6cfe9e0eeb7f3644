package io.accel4j.fit;

import java.lang.foreign.MemorySegment;

/**
 * How the ranks of a data-parallel run agree on a step, composed with the optimizer: after every rank's backward,
 * {@link #reduce} makes the gradients every rank's optimizer sees the same (their mean over the ranks), and the few
 * values the step needs from all ranks (the loss, an overflow flag) are combined by {@link #mean} and {@link #any}.
 * {@link #local()} is one rank; {@link DataParallel} is DDP. Every rank calls the same methods in the same order.
 */
public interface GradientSync extends AutoCloseable {

    /** This rank, in [0, {@link #ranks()}). */
    int rank();

    /** The number of ranks. */
    int ranks();

    /** Replaces {@code count} fp32 gradients by their mean over the ranks. */
    void reduce(MemorySegment grads, long count);

    /** The mean of {@code value} over the ranks (fp32, as the train loss is reported). */
    double mean(double value);

    /** Whether {@code local} holds on any rank. */
    boolean any(boolean local);

    @Override
    void close();

    /** One rank: nothing to agree on. */
    static GradientSync local() {
        return new GradientSync() {
            @Override
            public int rank() {
                return 0;
            }

            @Override
            public int ranks() {
                return 1;
            }

            @Override
            public void reduce(MemorySegment grads, long count) {
            }

            @Override
            public double mean(double value) {
                return value;
            }

            @Override
            public boolean any(boolean local) {
                return local;
            }

            @Override
            public void close() {
            }
        };
    }
}
