package io.accel4j.train.data;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * Batches of a {@link TokenFile} (or of the shards of a {@link TokenShards}) for one rank, in a {@link SampleOrder},
 * read ahead by background threads.
 *
 * <p>Each {@link #next} gives B·T inputs and B·T targets (int32), the B·T + 1 tokens from
 * {@link SampleOrder#tokenOffset}: inputs the first B·T, targets the same shifted by one. While the caller trains on
 * one batch the threads ({@code accel4j-dataloader}, daemons; one unless asked for more) read the next ones into free
 * buffers (two per thread) and file each under its place in the order; {@code next} takes them in that order and
 * copies them into the caller's memory, so the batches do not depend on the thread count. An exception in a thread
 * is rethrown by the {@code next} whose batch it was reading (as an {@link IllegalStateException} whose cause it is),
 * then and on every later call. {@link #waitNanos} is how long {@code next} has waited for them.
 *
 * <p>{@link #position()} is where the batches handed out so far leave the loader, a {@link State} that
 * {@link State#encode encodes} to bytes; a loader that {@link #seek seeks} to it (or is built for the same file and
 * settings and then seeks) hands out exactly the batches the first would have handed out next: training resumes bit
 * for bit.
 *
 * <p>One consumer thread; {@link #close} may also come from another thread and wakes a waiting {@code next}. Close the
 * loader before the {@link TokenFile}.
 */
public final class DataLoader implements AutoCloseable {

    /** Reads {@code n} tokens from {@code start} into {@code dst[0..n)}: {@link TokenFile#read}, or a test's. */
    @FunctionalInterface
    interface Reader {
        void read(long start, int[] dst, int n);
    }

    /**
     * A loader's position with everything needed to check that it belongs to the loader it is sought in.
     *
     * @param tokens the file's token count N
     * @param order  the {@link SampleOrder} position
     */
    public record State(long tokens, int B, int T, int rank, int ranks, SampleOrder.Mode mode, long seed,
                        SampleOrder.Position order) {

        private static final int MAGIC = 0x4134_444C; // "A4DL"
        private static final int VERSION = 1;

        /**
         * This position for rank {@code rank} of the same ranks. A data-parallel resume seeks rank 0's saved position
         * on every rank, which is right for the sequential and shuffled orders (the same on every rank), not for
         * llm.c's shuffle (each rank draws its own): the callers refuse that one with several ranks.
         */
        public State forRank(int rank) {
            return rank == this.rank ? this : new State(tokens, B, T, rank, ranks, mode, seed, order);
        }

        /** Little-endian bytes: magic, version, the fields in order, then the generator state's length and ints. */
        public byte[] encode() {
            int[] rng = order.rng();
            ByteBuffer b = ByteBuffer.allocate(4 * 2 + 8 + 4 * 5 + 8 + 8 + 4 + 4 + 4 * rng.length)
                    .order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(MAGIC).putInt(VERSION).putLong(tokens).putInt(B).putInt(T).putInt(rank).putInt(ranks)
                    .putInt(mode.ordinal()).putLong(seed).putLong(order.epoch()).putInt(order.step())
                    .putInt(rng.length);
            for (int x : rng) {
                b.putInt(x);
            }
            return b.array();
        }

        /** The state {@link #encode} wrote; an {@link IllegalArgumentException} for anything else. */
        public static State decode(byte[] bytes) {
            ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
            try {
                if (b.getInt() != MAGIC) {
                    throw new IllegalArgumentException("not a data loader state (bad magic)");
                }
                int version = b.getInt();
                if (version != VERSION) {
                    throw new IllegalArgumentException("data loader state version " + version + ", expected "
                            + VERSION);
                }
                long tokens = b.getLong();
                int bb = b.getInt(), t = b.getInt(), rank = b.getInt(), ranks = b.getInt(), mode = b.getInt();
                long seed = b.getLong(), epoch = b.getLong();
                int step = b.getInt(), n = b.getInt();
                if (mode < 0 || mode >= SampleOrder.Mode.values().length || n < 0 || n != b.remaining() / 4
                        || b.remaining() % 4 != 0) {
                    throw new IllegalArgumentException("corrupt data loader state (mode " + mode + ", " + n
                            + " generator ints, " + b.remaining() + " bytes left)");
                }
                int[] rng = new int[n];
                b.asIntBuffer().get(rng);
                return new State(tokens, bb, t, rank, ranks, SampleOrder.Mode.values()[mode], seed,
                        new SampleOrder.Position(epoch, step, rng));
            } catch (java.nio.BufferUnderflowException e) {
                throw new IllegalArgumentException("truncated data loader state (" + bytes.length + " bytes)", e);
            }
        }
    }

    private record Slot(int[] tokens, State after, Throwable error) {}

    /** Reads tokens {@code [start, start + n)} of shard {@code shard}. */
    private interface ShardReader {
        void read(int shard, long start, int[] dst, int n);
    }

    /**
     * One start of the reading threads: their buffers, the batches read and not yet taken (by sequence number, the
     * order {@link #order} gave them out in) and the counters; a {@link #seek} or a failure starts a new one.
     */
    private static final class Run {
        final java.util.Map<Long, Slot> ready = new java.util.HashMap<>();
        final BlockingQueue<int[]> free;
        long assigned;
        long taken;
        Thread[] workers;

        Run(int depth, int size) {
            free = new ArrayBlockingQueue<>(depth);
            for (int i = 0; i < depth; i++) {
                free.add(new int[size]);
            }
        }
    }

    private final String path;
    private final long tokens;
    private final ShardReader reader;
    private final int B;
    private final int T;
    private final int rank;
    private final int ranks;
    private final SampleOrder order;
    private final int bt;
    private final int threads;
    private final int depth;

    private volatile Run run;
    private State position;
    private Throwable failure;
    private volatile boolean closed;
    private long waitNanos;

    /**
     * A loader of {@code file} for rank {@code rank} of {@code ranks}, B sequences of T tokens per batch, starting at
     * epoch 0; the file needs at least {@code ranks·B·T + 1} tokens.
     *
     * @param seed the shuffle's unsigned 32-bit seed (llm.c: 42); ignored when sequential
     */
    public DataLoader(TokenFile file, int B, int T, int rank, int ranks, SampleOrder.Mode mode, long seed) {
        this(file.path(), file.size(), file::read, B, T, rank, ranks, mode, seed);
    }

    /**
     * A loader of the shards of {@code shards} ({@link SampleOrder#SampleOrder(int[], SampleOrder.Mode, long, int)}:
     * llm.c's order over shards), read ahead by {@code threads} threads into {@code 2·threads} buffers (at least 2).
     * The batches, and so training, are the same whatever the thread count. Each shard needs at least
     * {@code ranks·B·T + 1} tokens; samples do not cross shards.
     */
    public DataLoader(TokenShards shards, int B, int T, int rank, int ranks, SampleOrder.Mode mode, long seed,
                      int threads) {
        this(shards.describe(), names(shards), sizes(shards), (k, start, dst, n) -> shards.file(k).read(start, dst, n),
                B, T, rank, ranks, mode, seed, threads);
    }

    DataLoader(Path path, long tokens, Reader reader, int B, int T, int rank, int ranks, SampleOrder.Mode mode,
               long seed) {
        this(path.toString(), new String[] {path.toString()}, new long[] {tokens},
                (k, start, dst, n) -> reader.read(start, dst, n), B, T, rank, ranks, mode, seed, 1);
    }

    private static String[] names(TokenShards shards) {
        return shards.files().stream().map(f -> f.path().toString()).toArray(String[]::new);
    }

    private static long[] sizes(TokenShards shards) {
        return shards.files().stream().mapToLong(TokenFile::size).toArray();
    }

    private DataLoader(String path, String[] names, long[] sizes, ShardReader reader, int B, int T, int rank,
                       int ranks, SampleOrder.Mode mode, long seed, int threads) {
        if (B < 1 || T < 1 || ranks < 1) {
            throw new IllegalArgumentException("B, T and ranks must be >= 1, got B=" + B + ", T=" + T + ", ranks="
                    + ranks);
        }
        if (rank < 0 || rank >= ranks) {
            throw new IllegalArgumentException("rank must be in [0, " + ranks + "), got " + rank);
        }
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        }
        if ((long) B * T >= Integer.MAX_VALUE) {
            throw new IllegalArgumentException("B*T must be below 2^31 - 1, got " + (long) B * T);
        }
        int[] shardSamples = new int[sizes.length];
        long total = 0;
        for (int k = 0; k < sizes.length; k++) {
            long samples = SampleOrder.samplesPerEpoch(sizes[k], B, T, ranks);
            if (samples < 1) {
                throw new IllegalArgumentException(names[k] + " has " + sizes[k] + " tokens, fewer than the " + ranks
                        + "*" + B + "*" + T + "+1 = " + ((long) ranks * B * T + 1) + " one step needs: use a smaller B "
                        + "or T");
            }
            if (samples > Integer.MAX_VALUE) {
                throw new IllegalArgumentException(names[k] + " has too many samples (" + samples + ") for one "
                        + "epoch");
            }
            shardSamples[k] = (int) samples;
            total += sizes[k];
        }
        this.path = path;
        this.tokens = total;
        this.reader = reader;
        this.B = B;
        this.T = T;
        this.rank = rank;
        this.ranks = ranks;
        this.bt = B * T;
        this.threads = threads;
        this.depth = Math.max(2, 2 * threads);
        this.order = new SampleOrder(shardSamples, mode, seed, rank);
        this.position = state(order.position());
        start();
    }

    private State state(SampleOrder.Position p) {
        return new State(tokens, B, T, rank, ranks, order.mode(), order.seed(), p);
    }

    private synchronized void start() {
        Run r = new Run(depth, bt + 1);
        r.workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            r.workers[i] = Thread.ofPlatform().daemon().name("accel4j-dataloader" + (threads == 1 ? "" : "-" + i))
                    .unstarted(() -> produce(r));
        }
        run = r;
        for (Thread t : r.workers) {
            t.start();
        }
    }

    /**
     * A thread's loop: takes a free buffer, then (under the run's lock, so that sequence numbers follow the order)
     * the next sample, reads it and files it under its sequence number.
     */
    private void produce(Run r) {
        long seq = -1;
        try {
            while (!Thread.currentThread().isInterrupted()) {
                int[] buf = r.free.take();
                int sample;
                State after;
                synchronized (r) {
                    seq = r.assigned++;
                    sample = order.next();
                    after = state(order.position());
                }
                int k = order.shardOf(sample);
                reader.read(k, SampleOrder.tokenOffset(order.localSample(sample), B, T, rank, ranks), buf, bt + 1);
                synchronized (r) {
                    r.ready.put(seq, new Slot(buf, after, null));
                    r.notifyAll();
                }
                seq = -1;
            }
        } catch (InterruptedException e) {
            // stopped
        } catch (Throwable t) {
            if (closed || Thread.currentThread().isInterrupted() || seq < 0) {
                return; // a read cut short by close() or seek(): nothing to report
            }
            synchronized (r) {
                r.ready.put(seq, new Slot(null, null, t));
                r.notifyAll();
            }
        }
    }

    private synchronized void stop() {
        Run r = run;
        if (r == null || r.workers == null) {
            return;
        }
        for (Thread t : r.workers) {
            t.interrupt();
        }
        boolean interrupted = false;
        for (Thread t : r.workers) {
            while (true) {
                try {
                    t.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        r.workers = null;
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private Slot take() {
        if (closed) {
            throw new IllegalStateException("the data loader of " + path + " is closed");
        }
        if (failure != null) {
            throw failed();
        }
        Run r = run;
        Slot s;
        long t0 = System.nanoTime();
        synchronized (r) {
            try {
                while (!closed && !r.ready.containsKey(r.taken)) {
                    r.wait();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for a batch of " + path, e);
            }
            if (closed) {
                throw new IllegalStateException("the data loader of " + path + " is closed");
            }
            s = r.ready.remove(r.taken++);
        }
        waitNanos += System.nanoTime() - t0;
        if (s.error() != null) {
            failure = s.error();
            stop();
            throw failed();
        }
        position = s.after();
        return s;
    }

    private IllegalStateException failed() {
        return new IllegalStateException("reading a batch of " + path + " failed: " + failure, failure);
    }

    /** The next batch into {@code inputs} and {@code targets}, each at least B·T int32 (native byte order). */
    public void next(MemorySegment inputs, MemorySegment targets) {
        long need = (long) bt * Integer.BYTES;
        if (inputs.byteSize() < need || targets.byteSize() < need) {
            throw new IllegalArgumentException("inputs and targets need " + need + " bytes (B*T = " + bt
                    + " int32), got " + inputs.byteSize() + " and " + targets.byteSize());
        }
        Run r = run;
        int[] buf = take().tokens();
        MemorySegment.copy(buf, 0, inputs, ValueLayout.JAVA_INT_UNALIGNED, 0, bt);
        MemorySegment.copy(buf, 1, targets, ValueLayout.JAVA_INT_UNALIGNED, 0, bt);
        r.free.offer(buf);
    }

    /** The next batch into arrays of at least B·T. */
    public void next(int[] inputs, int[] targets) {
        if (inputs.length < bt || targets.length < bt) {
            throw new IllegalArgumentException("inputs and targets need B*T = " + bt + " ints, got "
                    + inputs.length + " and " + targets.length);
        }
        Run r = run;
        int[] buf = take().tokens();
        System.arraycopy(buf, 0, inputs, 0, bt);
        System.arraycopy(buf, 1, targets, 0, bt);
        r.free.offer(buf);
    }

    /**
     * Nanoseconds {@link #next} has spent waiting for the reading threads since the loader was made: the data wait
     * of the steps (≈ 0 when the threads keep ahead). Read on the consumer's thread.
     */
    public long waitNanos() {
        return waitNanos;
    }

    /** Where the batches handed out so far leave the loader (at first: epoch 0, nothing handed out). */
    public State position() {
        return position;
    }

    /**
     * Continues from {@code state}, a {@link #position()} of a loader of the same file (token count), B, T, rank,
     * ranks, mode and seed; anything else is an {@link IllegalArgumentException} naming what differs. Clears a
     * previous failure.
     */
    public void seek(State state) {
        if (closed) {
            throw new IllegalStateException("the data loader of " + path + " is closed");
        }
        State mine = position;
        String diff = state.tokens() != mine.tokens() ? "tokens " + state.tokens() + " vs " + mine.tokens()
                : state.B() != B ? "B " + state.B() + " vs " + B
                : state.T() != T ? "T " + state.T() + " vs " + T
                : state.rank() != rank ? "rank " + state.rank() + " vs " + rank
                : state.ranks() != ranks ? "ranks " + state.ranks() + " vs " + ranks
                : state.mode() != mine.mode() ? "mode " + state.mode() + " vs " + mine.mode()
                : state.mode() != SampleOrder.Mode.SEQUENTIAL && state.seed() != mine.seed()
                        ? "seed " + state.seed() + " vs " + mine.seed()
                : null;
        if (diff != null) {
            throw new IllegalArgumentException("the data loader state does not belong to this loader of " + path
                    + " (" + diff + ")");
        }
        stop();
        try {
            order.seek(state.order());
        } catch (IllegalArgumentException e) {
            order.seek(mine.order());
            start();
            throw new IllegalArgumentException("bad data loader state for " + path + ": " + e.getMessage(), e);
        }
        position = state;
        failure = null;
        start();
    }

    /** The (first) reading thread, for tests; null once stopped. */
    synchronized Thread thread() {
        Run r = run;
        return r == null || r.workers == null ? null : r.workers[0];
    }

    /** The reading threads. */
    public int threads() {
        return threads;
    }

    /** Samples (steps) per epoch: {@link SampleOrder#samplesPerEpoch}, summed over the shards. */
    public int samplesPerEpoch() {
        return order.samples();
    }

    /** Sequences per batch. */
    public int B() {
        return B;
    }

    /** Tokens per sequence. */
    public int T() {
        return T;
    }

    /** Stops the threads and frees their buffers; a waiting or later {@link #next} fails. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        stop();
        Run r = run;
        synchronized (r) {
            r.ready.clear();
            r.notifyAll();
        }
    }

    @Override
    public String toString() {
        return "DataLoader[" + path + ", B=" + B + ", T=" + T + ", rank " + rank + " of " + ranks + ", "
                + order.mode() + ", " + position.order() + "]";
    }
}
