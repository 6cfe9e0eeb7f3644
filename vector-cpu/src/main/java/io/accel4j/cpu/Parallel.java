package io.accel4j.cpu;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

/**
 * A fixed pool of kernel threads. Kernels split their work into independent tasks (disjoint outputs), so results
 * never depend on the thread count; {@link #forEach} runs tasks {@code 0…n−1} on the workers and the calling thread
 * and returns when all are done.
 *
 * <p>{@link #common()} is the process-wide pool: {@code -Daccel4j.threads=N}, or every available processor. A pool
 * is closed exactly once; a closed pool refuses work.
 *
 * <p><b>Hand-off.</b> A training step is a few hundred short kernel calls back to back, so what a call costs before
 * the first task starts and after the last one ends matters as much as the tasks (an executor's queue and futures
 * cost tens of microseconds a call: a worker parked on the queue must be woken, the caller parks on each future). As
 * OpenMP runtimes do, {@link #forEach} publishes the call in one volatile field that the workers spin on for
 * {@value #SPIN_MICROS} µs after their last task before they park, and the caller spins on the count of finished
 * tasks before it parks; both then cost no more than a cache line's round trip between cores while kernels follow
 * each other, and nothing when the pool idles.
 *
 * <p><b>Which thread runs which task.</b> The tasks are cut into one contiguous range per thread, as OpenMP's static
 * schedule does: thread t (the caller is 0, worker w is w) first claims the tasks of its own range, in order, then
 * helps with the others' ranges, claiming from the same per-range counters. When the threads keep pace, the same
 * thread therefore handles the same share of a kernel's rows from one call to the next, and reads what it wrote in
 * its own core's caches (a kernel's output is often the next kernel's input); when one lags (woken from parking,
 * preempted), the others take over its remaining tasks. Which thread runs a task is still not fixed, and a task's
 * result never depends on it. One call runs at a time: a caller that finds the pool busy (another thread's call in
 * progress) runs its tasks itself, as a call from inside a task does.
 */
public final class Parallel implements AutoCloseable {

    /** System property that sets the common pool's thread count. */
    public static final String THREADS_PROPERTY = "accel4j.threads";

    /** How long a worker, and a caller waiting for the last task, spin before parking. */
    static final long SPIN_MICROS = 100;
    private static final long SPIN_NANOS = SPIN_MICROS * 1_000;

    private static final AtomicInteger POOL_IDS = new AtomicInteger();

    private final int threads;
    private final Worker[] workers; // threads − 1 of them; the caller is the last one
    private final ThreadLocal<Boolean> insideTask = ThreadLocal.withInitial(() -> Boolean.FALSE);
    private final java.util.concurrent.locks.ReentrantLock calling = new java.util.concurrent.locks.ReentrantLock();
    /** The call in progress (or the last one), which the workers watch; null before the first. */
    private volatile Call current;
    private volatile boolean closed;

    /** Creates a pool of {@code threads} kernel threads (the calling thread counts as one). */
    public Parallel(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        }
        this.threads = threads;
        int id = POOL_IDS.incrementAndGet();
        this.workers = new Worker[threads - 1];
        for (int w = 0; w < workers.length; w++) {
            workers[w] = new Worker();
            workers[w].range = w + 1;
            Thread t = new Thread(workers[w], "accel4j-" + id + "-worker-" + (w + 1));
            t.setDaemon(true);
            workers[w].thread = t;
        }
        for (Worker w : workers) {
            w.thread.start();
        }
    }

    private static final class Common {
        static final Parallel POOL = new Parallel(defaultThreads());
    }

    /** The process-wide pool ({@value #THREADS_PROPERTY} threads, or one per available processor). */
    public static Parallel common() {
        return Common.POOL;
    }

    /** The common pool's size: the {@value #THREADS_PROPERTY} property if set, else available processors. */
    public static int defaultThreads() {
        String p = System.getProperty(THREADS_PROPERTY);
        if (p == null || p.isBlank()) {
            return Runtime.getRuntime().availableProcessors();
        }
        try {
            int t = Integer.parseInt(p.trim());
            if (t < 1) {
                throw new NumberFormatException();
            }
            return t;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("-D" + THREADS_PROPERTY + " must be a positive integer, got '" + p + "'");
        }
    }

    /** Number of kernel threads, the caller included. */
    public int threads() {
        return threads;
    }

    /**
     * Runs {@code body.accept(i)} for every {@code i} in {@code [0, tasks)}, spread over the pool, and waits for all.
     * Tasks must write disjoint outputs. Called from inside a task of this pool, or while another thread's call is in
     * progress, it runs the tasks on the calling thread. The first exception thrown by a task is rethrown (unchecked)
     * after all tasks have stopped; the tasks not started by then are not run.
     */
    public void forEach(int tasks, IntConsumer body) {
        if (closed) {
            throw new IllegalStateException("Parallel pool is closed");
        }
        if (tasks <= 0) {
            return;
        }
        if (threads == 1 || tasks == 1 || insideTask.get() || !calling.tryLock()) {
            for (int i = 0; i < tasks; i++) {
                body.accept(i);
            }
            return;
        }
        try {
            Call call = new Call(tasks, threads, body, Thread.currentThread());
            current = call;
            for (Worker w : workers) {
                if (w.parked) {
                    LockSupport.unpark(w.thread);
                }
            }
            insideTask.set(Boolean.TRUE);
            try {
                call.drain(0);
            } finally {
                insideTask.set(Boolean.FALSE);
            }
            call.awaitAll();
            call.rethrow();
        } finally {
            calling.unlock();
        }
    }

    /**
     * One {@link #forEach} call: its tasks, cut into one contiguous range per thread, each claimed from its own counter
     * (on its own cache line: the owner and a helper claim from the same counter only when one runs out of work), and
     * the count of those finished.
     */
    private static final class Call {
        /** Ints between two counters: 64 bytes, so that no two counters share a cache line. */
        private static final int STRIDE = 16;

        final int tasks;
        final int ranges;
        final IntConsumer body;
        final Thread caller;
        /** Counter of range r at r·STRIDE: the next task of that range to hand out (≥ its end when none is left). */
        final AtomicIntegerArray next;
        final AtomicInteger finished = new AtomicInteger();
        final java.util.concurrent.atomic.AtomicReference<Throwable> failure =
                new java.util.concurrent.atomic.AtomicReference<>();
        volatile boolean callerParked;

        Call(int tasks, int threads, IntConsumer body, Thread caller) {
            this.tasks = tasks;
            this.ranges = threads;
            this.body = body;
            this.caller = caller;
            this.next = new AtomicIntegerArray(threads * STRIDE);
            for (int r = 1; r < threads; r++) {
                next.set(r * STRIDE, start(r));
            }
        }

        /** First task of range r (range r is [start(r), start(r + 1))). */
        int start(int r) {
            return (int) ((long) r * tasks / ranges);
        }

        /**
         * Runs tasks until none is left to claim: those of range {@code own} first, then the other ranges' in turn. A
         * failure stops the handing out of further tasks.
         */
        void drain(int own) {
            for (int k = 0; k < ranges; k++) {
                int r = own + k < ranges ? own + k : own + k - ranges;
                int end = start(r + 1);
                for (int i; (i = next.getAndIncrement(r * STRIDE)) < end; ) {
                    try {
                        body.accept(i);
                    } catch (Throwable t) {
                        failure.compareAndSet(null, t);
                        stopHandingOut();
                    }
                    finish(1);
                }
            }
        }

        /** Marks every task not yet handed out as handed out and finished (it will never start). */
        private void stopHandingOut() {
            int left = 0;
            for (int r = 0; r < ranges; r++) {
                int end = start(r + 1);
                int was = next.getAndSet(r * STRIDE, end);
                if (was < end) {
                    left += end - was;
                }
            }
            if (left > 0) {
                finish(left);
            }
        }

        private void finish(int n) {
            if (finished.addAndGet(n) == tasks && callerParked) {
                LockSupport.unpark(caller);
            }
        }

        /** Returns once every task has finished: spinning a while, then parked until the last one unparks it. */
        void awaitAll() {
            long spinUntil = System.nanoTime() + SPIN_NANOS;
            while (finished.get() < tasks) {
                if (System.nanoTime() < spinUntil) {
                    Thread.onSpinWait();
                } else {
                    callerParked = true;
                    if (finished.get() < tasks) {
                        LockSupport.parkNanos(this, 1_000_000);
                    }
                }
            }
        }

        void rethrow() {
            Throwable t = failure.get();
            if (t instanceof RuntimeException re) {
                throw re;
            } else if (t instanceof Error err) {
                throw err;
            } else if (t != null) {
                throw new IllegalStateException("kernel task failed", t);
            }
        }
    }

    /** A worker thread: runs each new call's tasks, spins a while for the next call, then parks until unparked. */
    private final class Worker implements Runnable {
        Thread thread;
        int range; // the range of each call's tasks this worker claims first
        volatile boolean parked;

        @Override
        public void run() {
            insideTask.set(Boolean.TRUE);
            Call done = null;
            while (!closed) {
                Call call = current;
                if (call != null && call != done) {
                    call.drain(range);
                    done = call;
                    continue;
                }
                long spinUntil = System.nanoTime() + SPIN_NANOS;
                while ((call = current) == done && !closed && System.nanoTime() < spinUntil) {
                    Thread.onSpinWait();
                }
                if (call == done && !closed) {
                    parked = true;
                    if (current == done && !closed) {
                        LockSupport.park(this);
                    }
                    parked = false;
                }
            }
        }
    }

    /** Stops the workers. Idempotent; the common pool cannot be closed. */
    @Override
    public void close() {
        if (this == Common.POOL) {
            throw new UnsupportedOperationException("the common pool lives as long as the JVM");
        }
        if (!closed) {
            closed = true;
            for (Worker w : workers) {
                LockSupport.unpark(w.thread);
            }
        }
    }

    @Override
    public String toString() {
        return "Parallel[" + threads + " threads]";
    }
}
