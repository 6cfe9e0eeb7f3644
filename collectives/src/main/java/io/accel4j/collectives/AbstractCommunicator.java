package io.accel4j.collectives;

import io.accel4j.core.DType;
import io.accel4j.cpu.Check;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * What every backend shares: argument checks (once, at the call, for both forms), the per-communicator queue that
 * runs asynchronous collectives in issue order on one daemon thread, {@link Pending} handles with a deadline, and the
 * "broken after a failure" rule. Backends implement the {@code run…} methods, which block until done or throw.
 */
public abstract class AbstractCommunicator implements Communicator {

    /** Grace added to a queued collective's deadline on top of the backend's own timeout. */
    private static final long GRACE_NANOS = TimeUnit.SECONDS.toNanos(2);

    private final int rank;
    private final int size;
    private final Duration timeout;
    private final long timeoutNanos;
    private ExecutorService worker; // created on the first asynchronous call
    private Task last;              // the last task issued (async), or null
    private volatile CollectiveException broken;
    private volatile boolean closed;

    protected AbstractCommunicator(int rank, int size, Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        this.rank = rank;
        this.size = size;
        this.timeout = timeout;
        this.timeoutNanos = timeout.toNanos();
    }

    @Override public final int rank() { return rank; }
    @Override public final int size() { return size; }
    @Override public final Duration timeout() { return timeout; }

    /** Whether a blocking call may run on the caller's thread (false when a native call cannot be timed out). */
    protected abstract boolean blockingInline();

    protected abstract void runAllReduce(MemorySegment buf, long count, DType dtype, ReduceOp op);
    protected abstract void runReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype,
                                             ReduceOp op);
    protected abstract void runAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype);
    protected abstract void runBroadcast(MemorySegment buf, long count, DType dtype, int root);
    protected abstract void runBarrier();
    protected abstract void runSend(MemorySegment buf, long count, DType dtype, int peer);
    protected abstract void runRecv(MemorySegment buf, long count, DType dtype, int peer);

    /** Called once by {@link #close()}, before the queue thread is stopped; {@code midCollective} if work was pending. */
    protected abstract void onClose(boolean midCollective);

    // ---------------------------------------------------------------- the public calls: check, then queue or run

    @Override
    public Pending allReduceAsync(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        checkReduce(buf, count, dtype, op);
        return submit("allReduce", () -> runAllReduce(buf, count, dtype, op), buf);
    }

    @Override
    public void allReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        checkReduce(buf, count, dtype, op);
        inline("allReduce", () -> runAllReduce(buf, count, dtype, op), buf);
    }

    @Override
    public Pending reduceScatterAsync(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        checkReduceScatter(send, recv, count, dtype, op);
        return submit("reduceScatter", () -> runReduceScatter(send, recv, count, dtype, op), send, recv);
    }

    @Override
    public void reduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        checkReduceScatter(send, recv, count, dtype, op);
        inline("reduceScatter", () -> runReduceScatter(send, recv, count, dtype, op), send, recv);
    }

    @Override
    public Pending allGatherAsync(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        checkAllGather(send, recv, count, dtype);
        return submit("allGather", () -> runAllGather(send, recv, count, dtype), send, recv);
    }

    @Override
    public void allGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        checkAllGather(send, recv, count, dtype);
        inline("allGather", () -> runAllGather(send, recv, count, dtype), send, recv);
    }

    @Override
    public Pending broadcastAsync(MemorySegment buf, long count, DType dtype, int root) {
        checkBroadcast(buf, count, dtype, root);
        return submit("broadcast", () -> runBroadcast(buf, count, dtype, root), buf);
    }

    @Override
    public void broadcast(MemorySegment buf, long count, DType dtype, int root) {
        checkBroadcast(buf, count, dtype, root);
        inline("broadcast", () -> runBroadcast(buf, count, dtype, root), buf);
    }

    @Override
    public Pending barrierAsync() {
        return submit("barrier", this::runBarrier);
    }

    @Override
    public void barrier() {
        inline("barrier", this::runBarrier);
    }

    @Override
    public Pending sendAsync(MemorySegment buf, long count, DType dtype, int peer) {
        checkPeer(buf, count, dtype, peer);
        return submit("send", () -> runSend(buf, count, dtype, peer), buf);
    }

    @Override
    public void send(MemorySegment buf, long count, DType dtype, int peer) {
        checkPeer(buf, count, dtype, peer);
        inline("send", () -> runSend(buf, count, dtype, peer), buf);
    }

    @Override
    public Pending recvAsync(MemorySegment buf, long count, DType dtype, int peer) {
        checkPeer(buf, count, dtype, peer);
        return submit("recv", () -> runRecv(buf, count, dtype, peer), buf);
    }

    @Override
    public void recv(MemorySegment buf, long count, DType dtype, int peer) {
        checkPeer(buf, count, dtype, peer);
        inline("recv", () -> runRecv(buf, count, dtype, peer), buf);
    }

    @Override
    public final void close() {
        boolean pending;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            pending = last != null && !last.isDone();
        }
        try {
            onClose(pending); // first, so that the others learn why (not just that the queue thread was interrupted)
        } finally {
            synchronized (this) {
                if (worker != null) {
                    worker.shutdownNow();
                }
            }
        }
    }

    /** Queues {@code body} as a collective of this communicator (in order with the others, timed out alike). */
    protected final Pending runOnQueue(String what, Runnable body) {
        return submit(what, body);
    }

    /** How failures name this communicator's group (a split's), or null for none. */
    protected String groupName() {
        return null;
    }

    /** True once {@link #close()} has been called. */
    protected final boolean isClosed() {
        return closed;
    }

    // ---------------------------------------------------------------- argument checks

    private void checkReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        CollectiveArgs.reduce(buf, count, dtype, op);
    }

    private void checkReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        CollectiveArgs.reduceScatter(send, recv, count, dtype, op, rank, size);
    }

    private void checkAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        CollectiveArgs.allGather(send, recv, count, dtype, rank, size);
    }

    /** {@code send} is exactly this rank's chunk of {@code recv}. */
    protected final boolean inPlaceGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        return CollectiveArgs.inPlaceGather(send, recv, count, dtype, rank, size);
    }

    private void checkBroadcast(MemorySegment buf, long count, DType dtype, int root) {
        CollectiveArgs.broadcast(buf, count, dtype, root, size);
    }

    private void checkPeer(MemorySegment buf, long count, DType dtype, int peer) {
        CollectiveArgs.peer(buf, count, dtype, peer, rank, size);
    }

    // ---------------------------------------------------------------- running: queue or inline

    private void usable(String what) {
        if (closed) {
            throw new IllegalStateException(what + " on rank " + rank + ": the communicator is closed");
        }
        CollectiveException b = broken;
        if (b != null) {
            throw new CollectiveException(what, b.culprits(), Duration.ZERO, what + " on rank " + rank + " of "
                    + size + ": the communicator is broken by an earlier failure: " + b.getMessage(), b);
        }
    }

    private synchronized Pending submit(String what, Runnable body, MemorySegment... segs) {
        usable(what);
        for (MemorySegment s : segs) {
            Check.shared(what + "'s buffer", s, 2); // the queue thread reads it
        }
        if (worker == null) {
            worker = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "accel4j-comm-rank-" + rank);
                t.setDaemon(true);
                return t;
            });
        }
        long now = System.nanoTime();
        // queued behind an unfinished collective: it starts at the latest when that one's deadline passes
        long start = last == null || last.isDone() ? now : Math.max(now, last.deadline);
        Task t = new Task(what, now, start + timeoutNanos + GRACE_NANOS, body);
        last = t;
        worker.execute(t);
        return t;
    }

    private void inline(String what, Runnable body, MemorySegment... segs) {
        Task prev;
        synchronized (this) {
            prev = last;
        }
        if (!blockingInline()) {
            submit(what, body, segs).await();
            return;
        }
        usable(what);
        if (prev != null) {
            prev.await(); // earlier asynchronous collectives first, in order
        }
        guarded(body);
    }

    private void guarded(Runnable body) {
        try {
            body.run();
        } catch (CollectiveException e) {
            broken = e;
            throw e;
        }
    }

    /** A queued collective: its {@link Pending} handle. */
    private final class Task implements Runnable, Pending {
        final String what;
        final long issued;
        final long deadline;
        final Runnable body;
        final CountDownLatch done = new CountDownLatch(1);
        volatile RuntimeException failure;

        Task(String what, long issued, long deadline, Runnable body) {
            this.what = what;
            this.issued = issued;
            this.deadline = deadline;
            this.body = body;
        }

        @Override
        public void run() {
            try {
                usable(what);
                guarded(body);
            } catch (RuntimeException | Error e) {
                failure = e instanceof RuntimeException re ? re : new IllegalStateException(what + " failed", e);
            } finally {
                done.countDown();
            }
        }

        @Override
        public void await() {
            try {
                long left = deadline - System.nanoTime();
                if (!done.await(Math.max(left, 0), TimeUnit.NANOSECONDS)) {
                    long el = System.nanoTime() - issued;
                    CollectiveException e = new CollectiveException(what, List.of(), Duration.ofNanos(el), what
                            + " on rank " + rank + " of " + size + (groupName() == null ? "" : " of group "
                            + groupName()) + " failed after " + CollectiveException.seconds(el)
                            + ": it did not complete within the timeout (" + timeout + "); another rank died, "
                            + "left or is stuck (this backend cannot tell which)", null);
                    broken = e;
                    throw e;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CollectiveException(what, List.of(), Duration.ZERO, what + " on rank " + rank
                        + ": interrupted while waiting", e);
            }
            RuntimeException f = failure;
            if (f != null) {
                throw f;
            }
        }

        @Override
        public boolean isDone() {
            return done.getCount() == 0;
        }
    }
}
