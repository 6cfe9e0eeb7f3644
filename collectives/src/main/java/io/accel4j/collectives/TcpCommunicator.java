package io.accel4j.collectives;

import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;

import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.SocketException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One rank per process, over TCP: the host communicator of {@code accel4j launch} (and of any launcher that sets
 * {@code RANK}, {@code WORLD_SIZE}, {@code MASTER_ADDR}, {@code MASTER_PORT}). {@link #connect} meets the other
 * ranks through {@link TcpMesh} (every pair of ranks connected once).
 *
 * <p>The reductions are the ring of {@link RingSchedule}, step for step as {@link RingCommunicator} runs it: fp32
 * staging, at reduce-scatter step {@code s} rank {@code r} sends its partial chunk {@code (r−s−1) mod N} to the right
 * and combines the left's chunk {@code (r−s−2) mod N} into its own ({@code own op received}), AVG divides chunk
 * {@code r} by {@code N} once, then the all-gather steps copy. The sums are thus the in-process ring's, in the same
 * order: the results are bit-identical to {@link InProcessGroup}'s. Broadcast sends the root's bytes to every rank;
 * a barrier is {@code N−1} empty ring steps; send/recv are one frame on the pair's link.
 *
 * <p>Each step's send runs on a sender thread while this thread receives, so neighbours never wait on each other's
 * socket buffers. Every call has a deadline ({@link #timeout()}): a read past it names the rank that did not send, a
 * write past it the rank that did not read. A rank that fails sends an abort with its reason to every peer and
 * closes its links, so the others fail at once with a message naming it (a killed process's links close on their
 * own: its neighbours see the connection close and pass the failure on), never a hang.
 */
public final class TcpCommunicator extends AbstractCommunicator {

    /** A thread that never runs: a segment it may access is one the sender thread may access. */
    private static final Thread ANY_OTHER_THREAD = new Thread(() -> {});

    private final TcpLink[] links;
    private final TcpLink left;
    private final TcpLink right;
    private final int n;
    private final Arena arena = Arena.ofShared();
    private final ExecutorService sender;
    private MemorySegment staging = MemorySegment.NULL;
    private MemorySegment incoming = MemorySegment.NULL;
    private MemorySegment outgoing = MemorySegment.NULL; // a copy of a thread-confined buffer the sender may not read
    private long seq; // collectives entered (every rank numbers them alike)
    private volatile boolean aborted;

    private TcpCommunicator(TcpLink[] links, int rank, int size, Duration timeout) {
        super(rank, size, timeout);
        this.links = links;
        this.n = size;
        this.left = links[(rank - 1 + size) % size];
        this.right = links[(rank + 1) % size];
        this.sender = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "accel4j-tcp-send-rank-" + rank);
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Rank {@code rank} of {@code size}, meeting the others at {@code hostPort} (rank 0 listens there). Ranks whose
     * {@code configHash} differs from rank 0's are refused, naming them. Every call, the rendezvous included, gives up
     * after {@code timeout}.
     *
     * @throws CollectiveException when the rendezvous fails (port in use, rank 0 unreachable, a rank missing, a
     *                             different world size or configuration)
     */
    public static TcpCommunicator connect(String hostPort, int rank, int size, long configHash, Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        return new TcpCommunicator(TcpMesh.connect(hostPort, rank, size, configHash, timeout), rank, size, timeout);
    }

    /**
     * This rank's {@link Mailbox} over the same links (asynchronous data parallelism): from then on the links belong
     * to its reader threads, and only {@link #close} may follow, no collective.
     */
    public Mailbox mailbox() {
        return new TcpMailbox(links, rank());
    }

    @Override
    protected boolean blockingInline() {
        return true;
    }

    // ---------------------------------------------------------------- the collectives

    @Override
    protected void runAllReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        Call c = begin("allReduce", count + " × " + dtype + ", " + op);
        guard(c, () -> {
            stageReduce(buf, count, dtype);
            reduceScatterSteps(c, count, op);
            allGatherSteps(c, count, Float.BYTES);
            unstage(0, buf, count, dtype);
        });
    }

    @Override
    protected void runReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        Call c = begin("reduceScatter", count + " × " + dtype + ", " + op);
        guard(c, () -> {
            stageReduce(send, count, dtype);
            reduceScatterSteps(c, count, op);
            unstage(Chunks.start(count, n, rank()), recv, Chunks.length(count, n, rank()), dtype);
        });
    }

    @Override
    protected void runAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        Call c = begin("allGather", count + " × " + dtype);
        guard(c, () -> {
            int b = dtype.byteSize();
            MemorySegment s = staging(count * b);
            MemorySegment.copy(send, 0, s, Chunks.start(count, n, rank()) * b, Chunks.length(count, n, rank()) * b);
            allGatherSteps(c, count, b);
            MemorySegment.copy(s, 0, recv, 0, count * b);
        });
    }

    @Override
    protected void runBroadcast(MemorySegment buf, long count, DType dtype, int root) {
        Call c = begin("broadcast", count + " × " + dtype + ", root " + root);
        guard(c, () -> {
            long bytes = count * dtype.byteSize();
            if (rank() == root) {
                for (TcpLink l : links) {
                    if (l != null) {
                        awaitSent(c, l, sendAsync(c, l, buf, 0, bytes));
                    }
                }
            } else {
                receive(c, links[root], buf, 0, bytes);
            }
        });
    }

    @Override
    protected void runBarrier() {
        Call c = begin("barrier", "");
        guard(c, () -> {
            for (int t = 0; t < n - 1; t++) {
                exchange(c, MemorySegment.NULL, 0, MemorySegment.NULL, 0, 0);
            }
        });
    }

    @Override
    protected void runSend(MemorySegment buf, long count, DType dtype, int peer) {
        Call c = p2p("send", "send to rank " + peer + " (" + count + " × " + dtype + ")", peer, rank());
        guard(c, () -> awaitSent(c, links[peer], sendAsync(c, links[peer], buf, 0, count * dtype.byteSize())));
    }

    @Override
    protected void runRecv(MemorySegment buf, long count, DType dtype, int peer) {
        Call c = p2p("recv", "recv from rank " + peer + " (" + count + " × " + dtype + ")", rank(), peer);
        guard(c, () -> receive(c, links[peer], buf, 0, count * dtype.byteSize()));
    }

    @Override
    protected void onClose(boolean midCollective) {
        if (midCollective) {
            abortAll("rank " + rank() + " closed its communicator mid-collective");
        }
        for (TcpLink l : links) {
            if (l != null) {
                l.close();
            }
        }
        sender.shutdownNow();
        arena.close();
    }

    // ---------------------------------------------------------------- steps

    /** One call on this rank: its name for messages, the signature its frames carry, its deadline. */
    private record Call(String what, String label, int signature, long start, long deadline) {}

    private Call begin(String what, String detail) {
        seq++;
        String label = what + " #" + seq + (detail.isEmpty() ? "" : " (" + detail + ")");
        long now = System.nanoTime();
        return new Call(what, label, label.hashCode(), now, now + timeout().toNanos());
    }

    /** A send/recv: the signature names the pair, in the sender's order, so both sides compute the same one. */
    private Call p2p(String what, String label, int from, int to) {
        long now = System.nanoTime();
        return new Call(what, label, 31 * from + to, now, now + timeout().toNanos());
    }

    /** Runs a call's body; any failure aborts the group, and becomes a {@link CollectiveException} naming a rank. */
    private void guard(Call c, IoBody body) {
        try {
            body.run();
        } catch (CollectiveException e) {
            abortAll(e.getMessage());
            throw e;
        } catch (IOException | RuntimeException e) {
            CollectiveException f = failure(c, List.of(rank()), "failed: " + e, e);
            abortAll(f.getMessage());
            throw f;
        }
    }

    @FunctionalInterface
    private interface IoBody {
        void run() throws IOException;
    }

    /** fp32 staging of a reduction's input. */
    private void stageReduce(MemorySegment in, long count, DType dtype) {
        MemorySegment s = staging(count * Float.BYTES);
        if (dtype == DType.FP32) {
            MemorySegment.copy(in, 0, s, 0, count * Float.BYTES);
        } else {
            Casts.bf16ToF32(s, 0, in, 0, count);
        }
    }

    private void unstage(long from, MemorySegment out, long count, DType dtype) {
        if (dtype == DType.FP32) {
            MemorySegment.copy(staging, from * Float.BYTES, out, 0, count * Float.BYTES);
        } else {
            Casts.f32ToBf16(out, 0, staging, from, count);
        }
    }

    private void reduceScatterSteps(Call c, long count, ReduceOp op) throws IOException {
        for (RingSchedule.Step st : RingSchedule.steps(n, rank()).subList(0, n - 1)) {
            long sendLen = Chunks.length(count, n, st.send()), recvLen = Chunks.length(count, n, st.recv());
            MemorySegment in = incoming(recvLen * Float.BYTES);
            exchange(c, staging, Chunks.start(count, n, st.send()) * Float.BYTES, in, 0, sendLen * Float.BYTES,
                    recvLen * Float.BYTES);
            long off = Chunks.start(count, n, st.recv()) * Float.BYTES;
            Reduce.combine(op, staging, off, in, 0, recvLen);
        }
        if (n > 1 && op == ReduceOp.AVG) {
            Reduce.divide(staging, Chunks.start(count, n, rank()) * Float.BYTES, Chunks.length(count, n, rank()), n);
        }
    }

    private void allGatherSteps(Call c, long count, int b) throws IOException {
        List<RingSchedule.Step> steps = RingSchedule.steps(n, rank());
        for (RingSchedule.Step st : steps.subList(n - 1, steps.size())) {
            exchange(c, staging, Chunks.start(count, n, st.send()) * b, staging, Chunks.start(count, n, st.recv()) * b,
                    Chunks.length(count, n, st.send()) * b, Chunks.length(count, n, st.recv()) * b);
        }
    }

    /** One ring step: {@code sendBytes} of {@code out} to the right while {@code recvBytes} arrive from the left. */
    private void exchange(Call c, MemorySegment out, long outOff, MemorySegment in, long inOff, long sendBytes,
                          long recvBytes) throws IOException {
        Future<?> sent = sendAsync(c, right, out, outOff, sendBytes);
        receive(c, left, in, inOff, recvBytes);
        awaitSent(c, right, sent);
    }

    private void exchange(Call c, MemorySegment out, long outOff, MemorySegment in, long inOff, long bytes)
            throws IOException {
        exchange(c, out, outOff, in, inOff, bytes, bytes);
    }

    /** Queues a frame on the sender thread; a buffer it may not read (thread-confined) is copied first. */
    private Future<?> sendAsync(Call c, TcpLink to, MemorySegment src, long off, long bytes) {
        MemorySegment from = src;
        long at = off;
        if (bytes > 0 && !src.isAccessibleBy(ANY_OTHER_THREAD)) {
            from = outgoing(bytes);
            MemorySegment.copy(src, off, from, 0, bytes);
            at = 0;
        }
        MemorySegment f = from;
        long a = at;
        return sender.submit(() -> {
            to.write(c.signature(), f, a, bytes);
            return null;
        });
    }

    private void awaitSent(Call c, TcpLink to, Future<?> sent) {
        long left = c.deadline() - System.nanoTime();
        try {
            sent.get(Math.max(0, left), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            sent.cancel(true);
            throw failure(c, List.of(to.peer), "rank " + to.peer + " did not take the data within the timeout ("
                    + timeout() + "): it is stuck, or failed", null);
        } catch (ExecutionException e) {
            throw lost(c, to, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw failure(c, List.of(), "interrupted while waiting", e);
        }
    }

    private void receive(Call c, TcpLink from, MemorySegment dst, long off, long bytes) {
        try {
            String[] reason = new String[1];
            TcpLink.Header h = from.readHeader(c.deadline(), reason);
            if (h.tag() == TcpLink.ABORT) {
                throw failure(c, List.of(from.peer), "rank " + from.peer + " gave up: " + reason[0], null);
            }
            if (h.tag() != TcpLink.DATA) {
                throw failure(c, List.of(from.peer), String.format("corrupt frame from rank %d (tag 0x%08x)",
                        from.peer, h.tag()), null);
            }
            if (h.signature() != c.signature() || h.bytes() != bytes) {
                throw failure(c, List.of(from.peer, rank()), "ranks called different collectives: rank " + from.peer
                        + " sent " + h.bytes() + " bytes for another call, rank " + rank() + " expected " + bytes
                        + " bytes for " + c.label(), null);
            }
            from.readBody(dst, off, bytes, c.deadline());
        } catch (TcpLink.Expired e) {
            throw failure(c, List.of(from.peer), "rank " + from.peer + " did not send within the timeout ("
                    + timeout() + "; " + e.getMessage() + " received): it died, left or is stuck", null);
        } catch (IOException e) {
            throw lost(c, from, e);
        }
    }

    private CollectiveException lost(Call c, TcpLink peer, Throwable e) {
        String how = e instanceof EOFException || e instanceof SocketException
                ? "lost the connection to rank " + peer.peer + " (it failed, was killed or left): " + e.getMessage()
                : "failed talking to rank " + peer.peer + ": " + e;
        return failure(c, List.of(peer.peer), how, e);
    }

    private CollectiveException failure(Call c, List<Integer> culprits, String why, Throwable cause) {
        long el = System.nanoTime() - c.start();
        return new CollectiveException(c.what(), culprits, Duration.ofNanos(el), c.label() + " on rank " + rank()
                + " of " + size() + " failed after " + CollectiveException.seconds(el) + ": " + why, cause);
    }

    /** Closes every link without a word, as the OS does when a process is killed (for tests). */
    void killLinks() {
        aborted = true;
        for (TcpLink l : links) {
            if (l != null) {
                l.close();
            }
        }
    }

    /** Tells every peer why, once, then closes the links so nobody waits on this rank. */
    private void abortAll(String reason) {
        if (aborted) {
            return;
        }
        aborted = true;
        for (TcpLink l : links) {
            if (l != null) {
                l.abort(reason);
                l.close();
            }
        }
    }

    private MemorySegment staging(long bytes) {
        if (staging.byteSize() < bytes) {
            staging = arena.allocate(Math.max(bytes, staging.byteSize() * 2), 64);
        }
        return staging;
    }

    private MemorySegment outgoing(long bytes) {
        if (outgoing.byteSize() < bytes) {
            outgoing = arena.allocate(Math.max(bytes, outgoing.byteSize() * 2), 64);
        }
        return outgoing;
    }

    private MemorySegment incoming(long bytes) {
        if (incoming.byteSize() < bytes) {
            incoming = arena.allocate(Math.max(bytes, incoming.byteSize() * 2), 64);
        }
        return incoming;
    }
}
