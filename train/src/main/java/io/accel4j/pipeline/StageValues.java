package io.accel4j.pipeline;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The few numbers the stages of a step agree on (the loss, the sum of squares of the gradients, whether any gradient
 * overflowed): every stage's values gathered whole, as float64 bits, onto every stage, which then combines them in
 * stage order — so every stage computes the same bits, and the global gradient norm is summed in float64 from each
 * stage's own float64 sum.
 */
final class StageValues implements AutoCloseable {

    private final Communicator comm;
    private final int n;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment mine;
    private final MemorySegment all;

    StageValues(Communicator comm, int n) {
        this.comm = comm;
        this.n = n;
        this.mine = arena.allocate((long) n * Double.BYTES, 64);
        this.all = arena.allocate((long) n * Double.BYTES * comm.size(), 64);
    }

    /** Every stage's {@code values} ({@code n} each), indexed [stage][i]. A collective. */
    double[][] gather(double... values) {
        for (int i = 0; i < n; i++) {
            mine.setAtIndex(ValueLayout.JAVA_DOUBLE, i, values[i]);
        }
        int P = comm.size();
        // moved as 2·n fp32 words per stage: the data-movement collectives only copy bytes
        comm.allGather(mine, all, 2L * n * P, DType.FP32);
        double[][] out = new double[P][n];
        for (int s = 0; s < P; s++) {
            for (int i = 0; i < n; i++) {
                out[s][i] = all.getAtIndex(ValueLayout.JAVA_DOUBLE, (long) s * n + i);
            }
        }
        return out;
    }

    @Override
    public void close() {
        arena.close();
    }
}
