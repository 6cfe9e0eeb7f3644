package io.accel4j.train.data;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * Batches of a {@link TokenFile} for one rank, in a {@link SampleOrder}, read ahead by a background thread.
 *
 * <p>Each {@link #next} gives B·T inputs and B·T targets (int32), the B·T + 1 tokens from
 * {@link SampleOrder#tokenOffset}: inputs the first B·T, targets the same shifted by one. While the caller trains on
 * one batch the thread ({@code accel4j-dataloader}, a daemon) reads the next into one of two buffers and hands it over
 * through a one-slot queue; {@code next} copies it into the caller's memory. An exception in the thread is rethrown by
 * {@code next} (as an {@link IllegalStateException} whose cause it is), then and on every later call.
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

    private static final Slot CLOSED = new Slot(null, null, null);

    private final Path path;
    private final long tokens;
    private final Reader reader;
    private final int B;
    private final int T;
    private final int rank;
    private final int ranks;
    private final SampleOrder order;
    private final int bt;

    private volatile BlockingQueue<Slot> ready;
    private volatile BlockingQueue<int[]> free;
    private Thread thread;
    private State position;
    private Throwable failure;
    private volatile boolean closed;

    /**
     * A loader of {@code file} for rank {@code rank} of {@code ranks}, B sequences of T tokens per batch, starting at
     * epoch 0; the file needs at least {@code ranks·B·T + 1} tokens.
     *
     * @param seed the shuffle's unsigned 32-bit seed (llm.c: 42); ignored when sequential
     */
    public DataLoader(TokenFile file, int B, int T, int rank, int ranks, SampleOrder.Mode mode, long seed) {
        this(file.path(), file.size(), file::read, B, T, rank, ranks, mode, seed);
    }

    DataLoader(Path path, long tokens, Reader reader, int B, int T, int rank, int ranks, SampleOrder.Mode mode,
               long seed) {
        if (B < 1 || T < 1 || ranks < 1) {
            throw new IllegalArgumentException("B, T and ranks must be >= 1, got B=" + B + ", T=" + T + ", ranks="
                    + ranks);
        }
        if (rank < 0 || rank >= ranks) {
            throw new IllegalArgumentException("rank must be in [0, " + ranks + "), got " + rank);
        }
        if ((long) B * T >= Integer.MAX_VALUE) {
            throw new IllegalArgumentException("B*T must be below 2^31 - 1, got " + (long) B * T);
        }
        long samples = SampleOrder.samplesPerEpoch(tokens, B, T, ranks);
        if (samples < 1) {
            throw new IllegalArgumentException(path + " has " + tokens + " tokens, fewer than the " + ranks + "*" + B
                    + "*" + T + "+1 = " + ((long) ranks * B * T + 1) + " one step needs: use a smaller B or T");
        }
        if (samples > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(path + " has too many samples (" + samples + ") for one epoch");
        }
        this.path = path;
        this.tokens = tokens;
        this.reader = reader;
        this.B = B;
        this.T = T;
        this.rank = rank;
        this.ranks = ranks;
        this.bt = B * T;
        this.order = new SampleOrder((int) samples, mode, seed, rank);
        this.position = state(order.position());
        start();
    }

    private State state(SampleOrder.Position p) {
        return new State(tokens, B, T, rank, ranks, order.mode(), order.seed(), p);
    }

    private synchronized void start() {
        BlockingQueue<Slot> readyQ = new ArrayBlockingQueue<>(1);
        BlockingQueue<int[]> freeQ = new ArrayBlockingQueue<>(2);
        freeQ.add(new int[bt + 1]);
        freeQ.add(new int[bt + 1]);
        ready = readyQ;
        free = freeQ;
        thread = Thread.ofPlatform().daemon().name("accel4j-dataloader").start(() -> produce(readyQ, freeQ));
    }

    /** The thread's loop: owns {@link #order} while it runs. */
    private void produce(BlockingQueue<Slot> readyQ, BlockingQueue<int[]> freeQ) {
        try {
            while (!Thread.currentThread().isInterrupted()) {
                int[] buf = freeQ.take();
                int sample = order.next();
                reader.read(SampleOrder.tokenOffset(sample, B, T, rank, ranks), buf, bt + 1);
                readyQ.put(new Slot(buf, state(order.position()), null));
            }
        } catch (InterruptedException e) {
            // stopped
        } catch (Throwable t) {
            if (closed || Thread.currentThread().isInterrupted()) {
                return; // a read cut short by close() or seek(): nothing to report
            }
            try {
                readyQ.put(new Slot(null, null, t));
            } catch (InterruptedException e) {
                // stopped while reporting: the consumer is going away
            }
        }
    }

    private synchronized void stop() {
        Thread t = thread;
        if (t == null) {
            return;
        }
        t.interrupt();
        boolean interrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        thread = null;
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private int[] take() {
        if (closed) {
            throw new IllegalStateException("the data loader of " + path + " is closed");
        }
        if (failure != null) {
            throw failed();
        }
        Slot s;
        try {
            s = ready.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for a batch of " + path, e);
        }
        if (s == CLOSED) {
            throw new IllegalStateException("the data loader of " + path + " is closed");
        }
        if (s.error() != null) {
            failure = s.error();
            stop();
            throw failed();
        }
        position = s.after();
        return s.tokens();
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
        int[] buf = take();
        MemorySegment.copy(buf, 0, inputs, ValueLayout.JAVA_INT_UNALIGNED, 0, bt);
        MemorySegment.copy(buf, 1, targets, ValueLayout.JAVA_INT_UNALIGNED, 0, bt);
        free.offer(buf);
    }

    /** The next batch into arrays of at least B·T. */
    public void next(int[] inputs, int[] targets) {
        if (inputs.length < bt || targets.length < bt) {
            throw new IllegalArgumentException("inputs and targets need B*T = " + bt + " ints, got "
                    + inputs.length + " and " + targets.length);
        }
        int[] buf = take();
        System.arraycopy(buf, 0, inputs, 0, bt);
        System.arraycopy(buf, 1, targets, 0, bt);
        free.offer(buf);
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

    /** The prefetch thread, for tests; null once stopped. */
    synchronized Thread thread() {
        return thread;
    }

    /** Samples (steps) per epoch: {@link SampleOrder#samplesPerEpoch}. */
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

    /** Stops the thread and frees its buffers; a waiting or later {@link #next} fails. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        synchronized (this) {
            stop();
            ready.clear();
            ready.offer(CLOSED);
        }
    }

    @Override
    public String toString() {
        return "DataLoader[" + path + ", B=" + B + ", T=" + T + ", rank " + rank + " of " + ranks + ", "
                + order.mode() + ", " + position.order() + "]";
    }
}
