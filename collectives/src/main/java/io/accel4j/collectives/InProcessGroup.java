package io.accel4j.collectives;

import io.accel4j.core.DType;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * {@code N} ranks as threads of one JVM, talking through shared off-heap memory: {@link #communicator(int)} gives
 * rank {@code r}'s {@link Communicator}, {@link #run} runs a body on {@code N} threads, one per rank.
 *
 * <p>The collectives are the classic ring (see {@link RingCommunicator}): each rank owns a staging buffer that only its
 * right neighbour reads, and a step counter its neighbours wait on. Waits spin briefly, yield, then park (woken by the awaited rank); every wait checks
 * the group's failure, the awaited rank's departure and the timeout, so a rank that fails ({@link #fail}, an exception
 * in {@link #run}), is {@link #kill killed}, closes its communicator while needed or never arrives makes every other
 * rank fail with a {@link CollectiveException} within the timeout. After a failure the group is broken for good.
 */
public final class InProcessGroup implements AutoCloseable {

    /** What a rank runs in {@link #run}. */
    @FunctionalInterface
    public interface RankBody<T> {
        T run(Communicator comm) throws Exception;
    }

    /** The first failure: which ranks, what they did, why. */
    record Failure(List<Integer> ranks, String reason, Throwable cause) {}

    /** A rank's state that its neighbours read. Written only by the rank's own (current) thread. */
    static final class Slot {
        volatile long progress;     // ring steps completed, over the group's whole life
        volatile long entered;      // ring collectives entered
        volatile String signature;  // the collective entered last, e.g. "allReduce #3 (10 × FP32, SUM)"
        volatile boolean closed;
        volatile Thread waiter;
        volatile MemorySegment staging = MemorySegment.NULL; // what the right neighbour reads this collective
        private MemorySegment own = MemorySegment.NULL;      // this rank's buffer, grown as needed
        private final Arena arena;

        Slot(Arena arena) {
            this.arena = arena;
        }

        /**
         * Publishes this rank's own buffer, grown to {@code bytes}; call only when no neighbour may read it. A grown
         * buffer doubles, so the buffers left behind in the group's arena add up to less than the largest one.
         */
        MemorySegment staging(long bytes) {
            if (own.byteSize() < bytes) {
                own = arena.allocate(Math.max(bytes, own.byteSize() * 2), 64);
            }
            staging = own;
            return own;
        }

        /** Publishes the caller's buffer itself (zero-copy); same condition. */
        MemorySegment publish(MemorySegment user) {
            staging = user;
            return user;
        }
    }

    /** One direction of a point-to-point link: a single-message mailbox. */
    static final class Channel {
        volatile long sent;
        volatile long taken;
        MemorySegment buffer = MemorySegment.NULL;
        long count;
        DType dtype;
    }

    /** One blocking operation on one rank, for waits and messages. */
    record Call(String collective, String label, long seq, long base, long start) {}

    private static final int SPINS = 200;
    private static final int YIELDS = 200;
    private static final long PARK_NANOS = 1_000_000;

    private final int size;
    private final Duration timeout;
    private final long timeoutNanos;
    final Slot[] slots;
    private final Channel[] channels;
    /** Owns every staging and message buffer; closed, after the communicators, by {@link #close()}. */
    private final Arena arena = Arena.ofShared();
    private final RingCommunicator[] comms;
    private volatile Failure failure;
    /** How failures name this group: null for a group made by {@link #create}, else a split's description. */
    private final String name;
    /** The groups split from this one, by split number and color ({@link #child}). */
    private final java.util.Map<String, InProcessGroup> children = new java.util.concurrent.ConcurrentHashMap<>();

    private InProcessGroup(int size, Duration timeout) {
        this(size, timeout, null);
    }

    private InProcessGroup(int size, Duration timeout, String name) {
        this.name = name;
        if (size < 1) {
            throw new IllegalArgumentException("size must be >= 1, got " + size);
        }
        this.size = size;
        this.timeout = timeout;
        this.timeoutNanos = timeout.toNanos();
        this.slots = new Slot[size];
        this.channels = new Channel[size * size];
        for (int i = 0; i < size; i++) {
            slots[i] = new Slot(arena);
        }
        for (int i = 0; i < channels.length; i++) {
            channels[i] = new Channel();
        }
        this.comms = new RingCommunicator[size];
        for (int r = 0; r < size; r++) {
            comms[r] = new RingCommunicator(this, r, size, timeout);
        }
    }

    /** A group of {@code size} ranks with {@link Communicator#DEFAULT_TIMEOUT}. */
    public static InProcessGroup create(int size) {
        return create(size, Communicator.DEFAULT_TIMEOUT);
    }

    /** A group of {@code size} ranks whose every blocking call gives up after {@code timeout}. */
    public static InProcessGroup create(int size, Duration timeout) {
        return new InProcessGroup(size, timeout);
    }

    public int size() {
        return size;
    }

    public Duration timeout() {
        return timeout;
    }

    /** Rank {@code rank}'s communicator (the same object on every call). */
    public Communicator communicator(int rank) {
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank must be in [0, " + size + "), got " + rank);
        }
        return comms[rank];
    }

    /** Simulates the death of {@code rank}: every rank's current and later collectives fail, naming it. */
    public void kill(int rank) {
        communicator(rank);
        fail(List.of(rank), "was killed", null);
        slots[rank].closed = true;
    }

    /** Reports that {@code rank} failed with {@code cause}: the other ranks' collectives fail, naming it. */
    public void fail(int rank, Throwable cause) {
        communicator(rank);
        fail(List.of(rank), "failed: " + cause, cause);
    }

    /**
     * Runs {@code body} on {@code size} new threads, rank {@code r}'s with {@code communicator(r)}, closes each
     * communicator when its body returns, and returns the results in rank order. A body that throws fails the group
     * (the others' collectives then fail within the timeout); the exception of the rank at fault is rethrown (wrapped
     * in a {@link CollectiveException} when checked) once every thread has ended.
     */
    public <T> List<T> run(RankBody<T> body) {
        return run(body, true);
    }

    /**
     * {@link #run(RankBody)}, leaving the communicators open, so that the group can run again (a trainer's rank
     * threads per call, over communicators that live as long as the group). After a failure every later collective
     * of the group fails.
     */
    public <T> List<T> runAgain(RankBody<T> body) {
        return run(body, false);
    }

    private <T> List<T> run(RankBody<T> body, boolean closeAfter) {
        Object[] results = new Object[size];
        Throwable[] errors = new Throwable[size];
        Thread[] threads = new Thread[size];
        for (int r = 0; r < size; r++) {
            int rank = r;
            threads[r] = new Thread(() -> {
                try {
                    results[rank] = body.run(comms[rank]);
                } catch (Throwable e) {
                    errors[rank] = e;
                    if (!(e instanceof CollectiveException)) {
                        fail(List.of(rank), "threw " + e, e); // before the close below, so the cause is named
                    }
                } finally {
                    if (closeAfter) {
                        comms[rank].close();
                    }
                }
            }, "accel4j-rank-" + r);
            threads[r].setDaemon(true);
            threads[r].start();
        }
        for (Thread t : threads) {
            joinUninterruptibly(t);
        }
        Failure f = failure;
        Throwable first = f != null && !f.ranks().isEmpty() && errors[f.ranks().getFirst()] != null ? errors[f.ranks().getFirst()]
                : Arrays.stream(errors).filter(e -> e != null).findFirst().orElse(null);
        if (first instanceof RuntimeException re) {
            throw re;
        } else if (first instanceof Error err) {
            throw err;
        } else if (first != null) {
            throw new CollectiveException("run", f == null ? List.of() : f.ranks(), Duration.ZERO,
                    "a rank failed: " + first, first);
        }
        List<T> out = new ArrayList<>(size);
        for (Object o : results) {
            @SuppressWarnings("unchecked") T t = (T) o;
            out.add(t);
        }
        return out;
    }

    /**
     * The group split from this one under {@code id} (the split's number and color, the same on every member), made
     * by the first member to ask: {@code size} ranks, this group's timeout, named {@code name} in failures. A failure
     * of this group fails it too; closing this group closes it.
     */
    InProcessGroup child(String id, int size, String name) {
        InProcessGroup c = children.computeIfAbsent(id, k -> new InProcessGroup(size, timeout, name));
        Failure f = failure;
        if (f != null) {
            c.failFromParent(f);
        }
        return c;
    }

    /** The name failures give this group ("group color 1 (parent ranks [1, 3])"), or null for a top-level group. */
    String name() {
        return name;
    }

    private void failFromParent(Failure f) {
        String who = f.ranks().isEmpty() ? "" : (f.ranks().size() == 1 ? "rank " + f.ranks().getFirst()
                : "ranks " + f.ranks()) + " ";
        fail(List.of(), "the enclosing group failed: " + who + f.reason(), f.cause());
    }

    /** Closes every rank's communicator (ranks still in a collective fail), and every group split from this one. */
    @Override
    public void close() {
        for (InProcessGroup c : children.values()) {
            c.close();
        }
        for (RingCommunicator c : comms) {
            c.close();
        }
        synchronized (arena) {
            if (arena.scope().isAlive()) {
                arena.close();
            }
        }
    }

    /** {@code bytes} of 64-byte-aligned memory that lives until the group is closed. */
    MemorySegment allocate(long bytes) {
        synchronized (arena) {
            return arena.allocate(bytes, 64);
        }
    }

    // ---------------------------------------------------------------- for RingCommunicator

    Channel channel(int from, int to) {
        return channels[from * size + to];
    }

    /** Records the group's first failure and wakes every waiting rank. */
    void fail(List<Integer> ranks, String reason, Throwable cause) {
        synchronized (this) {
            if (failure == null) {
                failure = new Failure(List.copyOf(ranks), reason, cause);
            }
        }
        for (Slot s : slots) {
            wake(s);
        }
        Failure f = failure;
        for (InProcessGroup c : children.values()) {
            if (c.failure == null) {
                c.failFromParent(f);
            }
        }
    }

    /** Whether the group has failed (for tests that must wait until it has). */
    boolean hasFailed() {
        return failure != null;
    }

    /** Throws if the group has failed. */
    void checkFailure(int me, Call call) {
        Failure f = failure;
        if (f != null) {
            throw failed(me, call, f);
        }
    }

    static void wake(Slot s) {
        Thread t = s.waiter;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /**
     * Waits until {@code ready}, for rank {@code peer}; fails (and fails the group) on the group's failure, on
     * {@code peer}'s departure, on interruption and after the timeout, counted from the start of {@code call}.
     */
    void await(int me, Call call, int peer, BooleanSupplier ready) {
        if (ready.getAsBoolean()) {
            return;
        }
        slots[me].waiter = Thread.currentThread();
        for (int spins = 0; !ready.getAsBoolean(); spins++) {
            checkFailure(me, call);
            if (slots[peer].closed) {
                fail(List.of(peer), "closed its communicator while rank " + me + " waited for it in " + call.label(),
                        null);
            } else if (System.nanoTime() - call.start() > timeoutNanos) {
                fail(missing(call, peer), "did not arrive at " + call.label() + " within the timeout (" + timeout
                        + ", seen by rank " + me + ")", null);
            } else if (Thread.interrupted()) {
                fail(List.of(me), "was interrupted in " + call.label(), null);
            } else if (spins < SPINS) {
                Thread.onSpinWait();
            } else if (spins < SPINS + YIELDS) {
                Thread.yield(); // with more ranks than free cores, let the awaited rank run
            } else {
                LockSupport.parkNanos(PARK_NANOS);
            }
        }
    }

    /** The ranks that have not entered {@code call} yet; {@code [peer]} when all have (or for point-to-point). */
    private List<Integer> missing(Call call, int peer) {
        List<Integer> out = new ArrayList<>();
        if (call.seq() > 0) {
            for (int r = 0; r < size; r++) {
                if (slots[r].entered < call.seq()) {
                    out.add(r);
                }
            }
        }
        return out.isEmpty() ? List.of(peer) : out;
    }

    CollectiveException failed(int me, Call call, Failure f) {
        long el = System.nanoTime() - call.start();
        String who = f.ranks().isEmpty() ? "" : (f.ranks().size() == 1 ? "rank " + f.ranks().getFirst()
                : "ranks " + f.ranks()) + " ";
        return new CollectiveException(call.collective(), f.ranks(), Duration.ofNanos(el),
                call.label() + " on rank " + me + " of " + size + (name == null ? "" : " of group " + name)
                        + " failed after " + CollectiveException.seconds(el) + ": " + who + f.reason(), f.cause());
    }

    private static void joinUninterruptibly(Thread t) {
        boolean interrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
