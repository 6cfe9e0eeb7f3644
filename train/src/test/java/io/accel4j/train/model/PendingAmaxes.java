package io.accel4j.train.model;

import io.accel4j.core.fp8.AmaxHistory;
import java.util.ArrayList;
import java.util.List;

/**
 * The amaxes a test's stand-in backend has measured but not yet recorded, in call order: what the GPU keeps in its
 * device slots until {@link io.accel4j.core.ops.MatmulOps#flushAmaxes()}, which {@link #flush} plays.
 */
public final class PendingAmaxes {

    private final List<AmaxHistory> histories = new ArrayList<>();
    private final List<Float> amaxes = new ArrayList<>();
    private int added;
    private int flushes;

    /** Queues {@code amax} for {@code history}. */
    public void add(AmaxHistory history, float amax) {
        histories.add(history);
        amaxes.add(amax);
        added++;
    }

    /** Records every queued amax into its history, in call order, and empties the queue. */
    public void flush() {
        flushes++;
        for (int i = 0; i < histories.size(); i++) {
            histories.get(i).record(amaxes.get(i));
        }
        histories.clear();
        amaxes.clear();
    }

    /** Amaxes queued and not yet flushed. */
    public int pending() {
        return histories.size();
    }

    /** Amaxes queued since this object was made. */
    public int added() {
        return added;
    }

    /** Calls of {@link #flush}. */
    public int flushes() {
        return flushes;
    }
}
