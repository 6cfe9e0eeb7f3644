package io.accel4j.optim;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * ZeRO-Offload's overlapped step over chunks of an offloaded optimizer's range: while the caller's thread updates
 * chunk i on the host, a copier thread brings chunk i+1's gradients down and another takes chunk i−1's parameters
 * up. The three stages run over the same chunks in the same order, each a chunk behind the stage before it; each
 * chunk is copied and updated exactly once, so the result is the bits of the serial step (the update is element-wise,
 * {@link Optimizer#stepPart}).
 *
 * <p>{@link #step} returns when the caller's updates are done — every gradient is down, the master and the state
 * are final — and, unless told not to wait, when the upload is done too. A deferred upload lets the next forward
 * start while the last chunks still travel up: {@link #awaitUploaded} blocks only until the chunks holding a range are
 * up; the next {@link #step} (and {@link #awaitAll}) waits for all of them.
 *
 * <p>Failures: the first exception of any stage (a copy, an update) stops every stage at its next chunk and is
 * thrown, wrapped once with the stage and chunk, by the call that waits — the caller's {@link #step}, or a later
 * {@link #awaitUploaded}/{@link #awaitAll}/{@link #step}; no stage waits for one that failed. After a failure the
 * pipeline refuses further steps with the same error. The copies go through the backend's {@code DeviceMemory} from
 * the copier threads, which its contract allows (any thread may copy).
 */
final class OffloadPipeline implements AutoCloseable {

    /**
     * Elements per chunk: 1 Mi (4 MiB of fp32), large enough that a copy runs near the bus's bandwidth (PCIe reaches
     * it from about 1 MiB) and a chunk's two thread hand-offs (microseconds) are noise beside its update (≈ 0.3 ms
     * for AdamW's 28 bytes an element at ~100 GB/s), small enough that the first update starts after a 4 MiB copy and
     * GPT-2 124M's step is 119 chunks.
     */
    static final long CHUNK = 1L << 20;

    /** What a stage does to one chunk: elements {@code [from, from + count)} of the range. */
    @FunctionalInterface
    interface ChunkWork {
        void run(int chunk, long from, long count);
    }

    private static final int DOWN = 0, UPDATE = 1, UP = 2;
    private static final String[] STAGE = {"copying the gradients of chunk %d down",
            "the host update of chunk %d", "copying the parameters of chunk %d up"};
    private static final AtomicInteger IDS = new AtomicInteger();

    private final long length;
    /** Chunk i is elements {@code [from[i], from[i] + count[i])}, in the order the stages take them. */
    private final long[] from;
    private final long[] count;
    private final int chunks;
    private final ExecutorService copiers;
    /** Chunks each stage finished in this step; {@link #UP} starts full (nothing is on its way up). */
    private final int[] done = new int[3];
    private RuntimeException failure;
    private boolean closed;

    /** A pipeline over {@code length} elements in chunks of {@code chunk} (the last one shorter), in order. */
    OffloadPipeline(long length, long chunk) {
        this(length, List.of(new Optimizer.Part(0, length)), chunk);
    }

    /**
     * A pipeline over {@code length} elements taken part by part in {@code order} (each element in exactly one part),
     * each part cut into chunks of at most {@code chunk} elements: a model's units first to last, so that a unit's
     * parameters are up as early as the order allows.
     *
     * @throws IllegalArgumentException when the parts do not cover {@code [0, length)} exactly once
     */
    OffloadPipeline(long length, List<Optimizer.Part> order, long chunk) {
        if (length < 0 || chunk < 1) {
            throw new IllegalArgumentException("length must be >= 0 and chunk >= 1, got " + length + ", " + chunk);
        }
        List<Optimizer.Part> sorted = new ArrayList<>(order);
        sorted.sort(Comparator.comparingLong(Optimizer.Part::from));
        long at = 0;
        for (Optimizer.Part p : sorted) {
            if (p.from() != at || p.count() < 0) {
                throw new IllegalArgumentException("the upload order's parts must cover [0, " + length + ") once each: "
                        + "part [" + p.from() + ", " + (p.from() + p.count()) + ") where element " + at + " is next");
            }
            at += p.count();
        }
        if (at != length) {
            throw new IllegalArgumentException("the upload order's parts cover " + at + " elements, the range is "
                    + length);
        }
        List<long[]> cs = new ArrayList<>();
        for (Optimizer.Part p : order) {
            for (long a = p.from(); a < p.from() + p.count(); a += chunk) {
                cs.add(new long[] {a, Math.min(chunk, p.from() + p.count() - a)});
            }
        }
        this.length = length;
        this.chunks = cs.size();
        this.from = new long[chunks];
        this.count = new long[chunks];
        for (int i = 0; i < chunks; i++) {
            from[i] = cs.get(i)[0];
            count[i] = cs.get(i)[1];
        }
        this.done[UP] = chunks;
        int id = IDS.incrementAndGet();
        AtomicInteger n = new AtomicInteger();
        this.copiers = Executors.newFixedThreadPool(2, r -> {
            Thread t = new Thread(r, "accel4j-offload-" + id + "-copier-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    /** The number of chunks. */
    int chunks() {
        return chunks;
    }

    /**
     * One step: {@code down} on one copier thread, {@code update} here, {@code up} on the other, chunk by chunk, each
     * stage after the one before it has finished the chunk. Waits first for the previous step's upload.
     *
     * @param waitUpload whether to return only once every chunk is up
     * @throws IllegalStateException naming the stage and chunk that failed (this step's, or an earlier one's)
     */
    void step(ChunkWork down, ChunkWork update, ChunkWork up, boolean waitUpload) {
        awaitAll();
        synchronized (this) {
            checkUsable();
            done[DOWN] = done[UPDATE] = done[UP] = 0;
        }
        copiers.execute(() -> stage(DOWN, -1, down));
        copiers.execute(() -> stage(UP, UPDATE, up));
        for (int i = 0; i < chunks; i++) {
            await(DOWN, i + 1);
            try {
                update.run(i, from(i), count(i));
            } catch (RuntimeException | Error e) {
                fail(UPDATE, i, e);
                throw reported();
            }
            advance(UPDATE);
        }
        if (waitUpload) {
            awaitAll();
        }
    }

    /**
     * Blocks until the chunks holding elements {@code [a, a + n)} are up (this step's or the last one's): the last of
     * them in the stages' order (a scan of the chunks, a few hundred for GPT-2 124M).
     */
    void awaitUploaded(long a, long n) {
        if (n <= 0) {
            return;
        }
        if (a < 0 || a + n > length) {
            throw new IllegalArgumentException("elements [" + a + ", " + (a + n) + ") are outside the " + length
                    + " of the pipeline");
        }
        int last = -1;
        for (int i = 0; i < chunks; i++) {
            if (from[i] < a + n && a < from[i] + count[i]) {
                last = i;
            }
        }
        await(UP, last + 1);
    }

    /** Blocks until every chunk is up. */
    void awaitAll() {
        await(UP, chunks);
    }

    private long from(int i) {
        return from[i];
    }

    private long count(int i) {
        return count[i];
    }

    /** A copier's loop: each chunk once the stage {@code after} (−1: none) has finished it; stops at a failure. */
    private void stage(int stage, int after, ChunkWork work) {
        for (int i = 0; i < chunks; i++) {
            synchronized (this) {
                while (failure == null && after >= 0 && done[after] <= i) {
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        fail(stage, i, e);
                    }
                }
                if (failure != null) {
                    return;
                }
            }
            try {
                work.run(i, from(i), count(i));
            } catch (RuntimeException | Error e) {
                fail(stage, i, e);
                return;
            }
            advance(stage);
        }
    }

    private synchronized void advance(int stage) {
        done[stage]++;
        notifyAll();
    }

    /** Waits until {@code stage} has finished {@code count} chunks; throws the pipeline's failure instead. */
    private synchronized void await(int stage, int count) {
        while (failure == null && done[stage] < count) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail(stage, done[stage], e);
            }
        }
        if (failure != null) {
            throw reported();
        }
    }

    /**
     * The failure as this caller's exception: the same message and cause each time, a new exception (one thrown twice
     * through a try-with-resources would suppress itself), its stack the waiter's.
     */
    private synchronized RuntimeException reported() {
        return new IllegalStateException(failure.getMessage(), failure.getCause());
    }

    /** Records the first failure (later ones are suppressed into it) and wakes every waiter. */
    private synchronized void fail(int stage, int chunk, Throwable cause) {
        if (failure == null) {
            failure = new IllegalStateException("the offloaded optimizer's pipeline failed at "
                    + String.format(STAGE[stage], chunk) + " of " + chunks + ": " + cause, cause);
        } else if (failure.getCause() != cause) {
            failure.addSuppressed(cause);
        }
        notifyAll();
    }

    private void checkUsable() {
        if (closed) {
            throw new IllegalStateException("the offloaded optimizer is closed");
        }
        if (failure != null) {
            throw reported();
        }
    }

    /**
     * Stops the copiers: an upload still under way is abandoned (a waiter gets an error); waits for them to end, so
     * that no copy touches the buffers after this returns.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (failure == null && done[UP] < chunks) {
                failure = new IllegalStateException("the offloaded optimizer was closed during its upload");
            }
            notifyAll();
        }
        copiers.shutdown();
        try {
            if (!copiers.awaitTermination(1, TimeUnit.MINUTES)) {
                throw new IllegalStateException("the offloaded optimizer's copier threads did not stop in a minute");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
