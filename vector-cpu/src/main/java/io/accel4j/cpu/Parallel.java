package io.accel4j.cpu;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntConsumer;

/**
 * A fixed pool of kernel threads. Kernels split their work into independent tasks (disjoint outputs), so results
 * never depend on the thread count; {@link #forEach} runs tasks {@code 0…n−1} on the workers and the calling thread
 * and returns when all are done.
 *
 * <p>{@link #common()} is the process-wide pool: {@code -Daccel4j.threads=N}, or every available processor. A pool
 * is closed exactly once; a closed pool refuses work.
 */
public final class Parallel implements AutoCloseable {

    /** System property that sets the common pool's thread count. */
    public static final String THREADS_PROPERTY = "accel4j.threads";

    private static final AtomicInteger POOL_IDS = new AtomicInteger();

    private final int threads;
    private final ExecutorService workers; // threads − 1 of them; the caller is the last one
    private final ThreadLocal<Boolean> insideTask = ThreadLocal.withInitial(() -> Boolean.FALSE);
    private volatile boolean closed;

    /** Creates a pool of {@code threads} kernel threads (the calling thread counts as one). */
    public Parallel(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        }
        this.threads = threads;
        int id = POOL_IDS.incrementAndGet();
        AtomicInteger n = new AtomicInteger();
        ThreadFactory factory = r -> {
            Thread t = new Thread(r, "accel4j-" + id + "-worker-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
        this.workers = threads > 1 ? Executors.newFixedThreadPool(threads - 1, factory) : null;
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
     * Tasks must write disjoint outputs. Called from inside a task of this pool, it runs the tasks inline.
     * The first exception thrown by a task is rethrown (unchecked) after all tasks have stopped.
     */
    public void forEach(int tasks, IntConsumer body) {
        if (closed) {
            throw new IllegalStateException("Parallel pool is closed");
        }
        if (tasks <= 0) {
            return;
        }
        if (threads == 1 || tasks == 1 || insideTask.get()) {
            for (int i = 0; i < tasks; i++) {
                body.accept(i);
            }
            return;
        }
        AtomicInteger next = new AtomicInteger();
        Runnable drain = () -> {
            insideTask.set(Boolean.TRUE);
            try {
                for (int i; (i = next.getAndIncrement()) < tasks; ) {
                    body.accept(i);
                }
            } finally {
                insideTask.set(Boolean.FALSE);
            }
        };
        int helpers = Math.min(threads - 1, tasks - 1);
        List<Future<?>> futures = new ArrayList<>(helpers);
        for (int h = 0; h < helpers; h++) {
            futures.add(workers.submit(drain));
        }
        Throwable failure = null;
        try {
            drain.run();
        } catch (Throwable t) {
            failure = t;
            next.set(tasks); // stop handing out work
        }
        for (Future<?> f : futures) {
            try {
                f.get();
            } catch (ExecutionException e) {
                if (failure == null) {
                    failure = e.getCause();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (failure == null) {
                    failure = e;
                }
            }
        }
        if (failure instanceof RuntimeException re) {
            throw re;
        } else if (failure instanceof Error err) {
            throw err;
        } else if (failure != null) {
            throw new IllegalStateException("kernel task failed", failure);
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
            if (workers != null) {
                workers.shutdownNow();
            }
        }
    }

    @Override
    public String toString() {
        return "Parallel[" + threads + " threads]";
    }
}
