package io.accel4j.fit;

import java.lang.foreign.MemorySegment;

/**
 * Where a rank's batches come from: {@link #next} fills one batch of B sequences of T positions into host memory,
 * inputs as {@code B·T·width} 4-byte values (int32 token ids, or fp32 features) and targets as {@code B·T} int32 class
 * ids. With several ranks each rank gets its own source ({@link Factory#open}) and must read its own slice of each
 * global batch, so that N ranks of B see what one rank of N·B would.
 */
@FunctionalInterface
public interface DataSource {

    /** Fills the next batch. */
    void next(MemorySegment inputs, MemorySegment targets);

    /**
     * Nanoseconds {@link #next} has waited for batches so far (a loader reading ahead on threads of its own: the time
     * its batches were not ready), or −1 (the default) when the source does not measure it. A {@link Learner} reports
     * each step's difference as {@code metrics.jsonl}'s {@code data_ms}, the CLI trainer's field; not measured, the
     * field is left out.
     */
    default long waitNanos() {
        return -1;
    }

    /**
     * A source that can continue where a checkpoint left it: {@link #skip} puts a fresh source where one that had
     * filled {@code batches} batches would be. A {@link Learner} whose sources are all resumable resumes bit for bit.
     */
    interface Resumable extends DataSource {

        /** Moves on as if {@code batches} batches had been read. */
        void skip(long batches);
    }

    /** Makes each rank's source. */
    @FunctionalInterface
    interface Factory {

        /** The source of rank {@code rank} of {@code ranks}, for batches of B × T. */
        DataSource open(int rank, int ranks, int B, int T);
    }
}
