package io.accel4j.train;

import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * A {@link Trainer}'s validation: the mean loss of its model over the first {@link #batches} batches of the val file,
 * read in order from the start each time, in the trainer's input buffers. FP8 casts use the current scales but the
 * amax histories are left as they were, so training does not depend on when it validates.
 */
final class Validation implements AutoCloseable {

    private final Gpt2 model;
    private final int B;
    private final int T;
    private final DataLoader val;
    private final DataLoader.State start;
    private final int batches;

    /**
     * Over {@code valFile} in batches of B × T ({@code asked} of them, fewer when the file is short); null or
     * {@code asked} 0: none.
     */
    static Validation of(Gpt2 model, TokenFile valFile, int B, int T, int asked) throws IOException {
        if (valFile == null || asked <= 0) {
            return null;
        }
        return new Validation(model, new DataLoader(valFile, B, T, 0, 1, SampleOrder.Mode.SEQUENTIAL, 0), B, T,
                asked);
    }

    private Validation(Gpt2 model, DataLoader val, int B, int T, int asked) {
        this.model = model;
        this.val = val;
        this.B = B;
        this.T = T;
        this.start = val.position();
        this.batches = Math.min(asked, val.samplesPerEpoch());
    }

    /** The batches each {@link #loss} averages over. */
    int batches() {
        return batches;
    }

    /** The mean loss, {@code inputs} and {@code targets} (B·T int32 each) as scratch. A collective at ZeRO-3. */
    double loss(MemorySegment inputs, MemorySegment targets) {
        Fp8State fp8 = model.fp8();
        byte[] fp8Before = fp8 == null ? null : fp8.encode();
        try {
            val.seek(start);
            double sum = 0;
            for (int i = 0; i < batches; i++) {
                val.next(inputs, targets);
                sum += model.forward(inputs, targets, B, T);
            }
            return sum / batches;
        } finally {
            if (fp8Before != null) {
                fp8.restore(fp8Before); // the casts recorded the validation data's amaxes: forget them
            }
        }
    }

    @Override
    public void close() {
        val.close();
    }
}
