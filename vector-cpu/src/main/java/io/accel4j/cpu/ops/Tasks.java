package io.accel4j.cpu.ops;

import io.accel4j.cpu.Parallel;
import java.util.function.IntConsumer;

/**
 * How the memory-bound kernels of this package hand their tasks to the pool. The tasks themselves (which rows or
 * elements each one owns) are fixed by the problem's sizes, never by the thread count; only whether they run on the
 * pool or inline depends on the amount of work.
 */
final class Tasks {

    /** Floats per task of the element-wise kernels: a multiple of every vector length (64 KiB of each stream). */
    static final int CHUNK = 16 * 1024;

    /**
     * Below this many floats touched a kernel runs its tasks on the calling thread: handing work to the pool costs
     * ~20–30 µs here, the time to stream some 10⁵ floats.
     */
    static final long PARALLEL_MIN = 1L << 17;

    private Tasks() {}

    /** Runs tasks {@code 0…tasks−1}: on the pool when {@code floats} is worth it, else inline in order. */
    static void run(Parallel pool, int tasks, long floats, IntConsumer body) {
        if (floats < PARALLEL_MIN || pool.threads() == 1) {
            for (int i = 0; i < tasks; i++) {
                body.accept(i);
            }
        } else {
            pool.forEach(tasks, body);
        }
    }

    /** Number of {@link #CHUNK}-float tasks covering n floats. */
    static int chunks(long n) {
        return Math.toIntExact((n + CHUNK - 1) / CHUNK);
    }
}
