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

    /** Number of {@code chunk}-element tasks covering n elements. */
    static int chunks(long n, int chunk) {
        return Math.toIntExact((n + chunk - 1) / chunk);
    }

    /** One task's share of {@code [0, n)}: elements {@code [from, to)}. */
    @FunctionalInterface
    interface Range {
        void run(int task, long from, long to);
    }

    /**
     * Cuts {@code [0, n)} into tasks of {@code chunk} elements (the last one shorter) and runs them on the pool. The
     * cut depends on n and chunk only, so per-task partial results combine the same way on any thread count.
     */
    static void ranges(Parallel pool, long n, int chunk, Range body) {
        pool.forEach(chunks(n, chunk), task -> run(body, task, n, chunk));
    }

    /** {@link #ranges(Parallel, long, int, Range)}, run inline when the kernel touches fewer than {@code floats}. */
    static void ranges(Parallel pool, long n, int chunk, long floats, Range body) {
        run(pool, chunks(n, chunk), floats, task -> run(body, task, n, chunk));
    }

    private static void run(Range body, int task, long n, int chunk) {
        long from = (long) task * chunk;
        body.run(task, from, Math.min(n, from + chunk));
    }
}
