package io.accel4j.train.plan;

import io.accel4j.train.model.GptConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

/**
 * A trial step's host batch, as the trainer allocates it: B·T random token ids for the inputs and the targets (seed
 * 1, drawn input then target position by position) and the loss scalar. What a trial step allocates besides the model
 * and its optimizer ({@link #bytes}).
 */
record TrialBatch(MemorySegment inputs, MemorySegment targets, MemorySegment scalar) {

    /** A batch of B sequences of T tokens below {@code config.V()}, in {@code arena}. */
    static TrialBatch random(Arena arena, GptConfig config, int B, int T) {
        long tokens = (long) B * T;
        MemorySegment inputs = arena.allocate(tokens * Integer.BYTES, 64);
        MemorySegment targets = arena.allocate(tokens * Integer.BYTES, 64);
        MemorySegment scalar = arena.allocate(Float.BYTES, 64);
        Random r = new Random(1);
        for (long i = 0; i < tokens; i++) {
            inputs.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(config.V()));
            targets.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(config.V()));
        }
        return new TrialBatch(inputs, targets, scalar);
    }

    /** Bytes of the three buffers. */
    long bytes() {
        return inputs.byteSize() + targets.byteSize() + scalar.byteSize();
    }
}
