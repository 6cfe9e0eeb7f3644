package io.accel4j.fit;

/**
 * Where a run is in its data, counted globally: the samples (sequences of T positions, or examples) every
 * data-parallel replica together has consumed in the deterministic order, so that a checkpoint continues on the same
 * data under another data-parallel width or batch split (replica r of D reading batches r, r + D, … of B samples:
 * after {@code k} batches each, D·B·k samples). A checkpoint stores {@link #samples()}; each rank of the resumed run
 * skips {@link #batchesPerReplica} of its own.
 */
record DataPosition(long samples) {

    DataPosition {
        if (samples < 0) {
            throw new IllegalArgumentException("samples consumed must be >= 0, got " + samples);
        }
    }

    /** After {@code batches} batches of {@code B} samples on each of {@code replicas} replicas. */
    static DataPosition after(long batches, int B, int replicas) {
        return new DataPosition(Math.multiplyExact(Math.multiplyExact(batches, (long) B), (long) replicas));
    }

    /**
     * The batches of {@code B} samples each of {@code replicas} replicas has read at this position.
     *
     * @throws IllegalArgumentException when B·replicas does not divide the samples (the run would not continue on the
     *                                  same data), naming the numbers
     */
    long batchesPerReplica(int B, int replicas) {
        long per = (long) B * replicas;
        if (samples % per != 0) {
            throw new IllegalArgumentException("the checkpoint consumed " + samples + " samples, which " + replicas
                    + " replica(s) × batch " + B + " = " + per + " do not divide: resume with a batch and "
                    + "data-parallel width whose product divides it");
        }
        return samples / per;
    }
}
