package io.accel4j.train;

import io.accel4j.fit.Learner;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;

/**
 * A GPT-2 run's validation: the mean loss of a {@link Learner} over the first {@link #batches} batches of the val
 * file, B × T each, read in order from the file's start each time ({@link Learner#evaluate}: FP8's amax histories
 * are left as they were). It owns its loader.
 */
public final class Validation implements AutoCloseable {

    private final DataLoader loader;
    private final DataLoader.State start;
    private final int batches;

    private Validation(DataLoader loader, int batches) {
        this.loader = loader;
        this.start = loader.position();
        this.batches = Math.min(batches, loader.samplesPerEpoch());
    }

    /**
     * Over {@code val} in {@code cfg}'s batches, {@code cfg.valBatches()} of them (fewer when the file is short); null
     * when there is no val file or the run asks for no validation batches.
     */
    public static Validation of(TokenFile val, TrainConfig cfg) {
        if (val == null || cfg.valBatches() <= 0) {
            return null;
        }
        return new Validation(new DataLoader(val, cfg.batch(), cfg.seq(), 0, 1, SampleOrder.Mode.SEQUENTIAL, 0),
                cfg.valBatches());
    }

    /** The batches each {@link #loss} averages over. */
    public int batches() {
        return batches;
    }

    /** The learner's mean loss over the batches; a collective where the learner's forward is one (ZeRO-3). */
    public double loss(Learner learner) {
        loader.seek(start);
        return learner.evaluate(loader::next, batches);
    }

    @Override
    public void close() {
        loader.close();
    }
}
