package io.accel4j.collectives;

import io.accel4j.core.DType;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.Event;
import io.accel4j.cuda.NcclComm;
import io.accel4j.cuda.NcclConfig;
import io.accel4j.cuda.Stream;
import io.accel4j.cuda.bindings.nccl_h;
import io.accel4j.kernels.GpuOps;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

/**
 * The NCCL backend of {@link Communicator}: one rank per GPU, the collectives queued on this communicator's own
 * {@link Stream}.
 *
 * <h2>Buffers are device views</h2>
 * Every {@link MemorySegment} passed is a <b>device view</b> (as {@code GpuOps} uses them): a segment whose address is
 * a device address of this rank's context and whose size is the buffer's ({@link GpuOps#device(DeviceBuffer)}); it is
 * never read on the host. Sizes are checked against the segments; that the memory is device memory is not (NCCL fails
 * asynchronously on host memory).
 *
 * <h2>Ordering with the kernels</h2>
 * {@code GpuOps}' kernels and {@code CudaMemory}'s copies run on the legacy default stream; this communicator's
 * stream is non-blocking, so it would not wait for them. Each call therefore first makes the stream wait, on the
 * device ({@code cuEventRecord} on the default stream, {@code cuStreamWaitEvent}), for everything queued on the
 * default stream before the call: a buffer a kernel has just been queued to write is complete when NCCL reads it,
 * and the host does not wait (a bucket's all-reduce overlaps the rest of backward). In the other direction the
 * caller awaits the {@link Pending} before queueing work that reads or writes the collective's buffers.
 *
 * <h2>Asynchrony, timeouts, failures</h2>
 * A call queues its NCCL operation(s) on the stream and records an {@link Event}; the {@link Pending} it returns waits
 * by polling that event ({@code cuEventQuery}) and, in between, {@code ncclCommGetAsyncError}. Collectives run in
 * issue order (one stream), so the contract's ordering holds. When the event has not completed within the timeout
 * (counted from the issue, or from the previous collective's deadline when queued behind one), or NCCL reports an
 * asynchronous error (a peer died: {@code ncclRemoteError}, …), the communicator is torn down with
 * {@code ncclCommAbort} and the wait throws a {@link CollectiveException} naming the collective, this rank and the
 * elapsed time; the communicator is then broken and its later calls fail at once. NCCL does not say which peer is
 * at fault: the culprits are empty. Only the wait is timed: the communicator is blocking (NCCL's default), so an
 * NCCL call that itself blocks on the host (connection setup inside {@code ncclGroupEnd} with a dead peer) is not
 * interrupted; NCCL's non-blocking mode ({@code blocking = 0}) would cover that and is not supported yet.
 *
 * <h2>Reductions: what NCCL computes</h2>
 * FP32 and BF16, {@link ReduceOp#SUM} → {@code ncclSum}, {@link ReduceOp#AVG} → {@code ncclAvg},
 * {@link ReduceOp#MAX} → {@code ncclMax}. This differs from the host backends in three documented ways:
 * <ul>
 *   <li><b>bf16 sums are not accumulated in fp32.</b> NCCL's reduction kernels ({@code src/device/reduce_kernel.h})
 *       add bf16 values with {@code __hadd} on sm_80+, so the partial sum is rounded to bf16 at every hop of the ring
 *       or tree ({@code N−1} roundings instead of one); for fp32 accumulation all-reduce an fp32 copy instead.</li>
 *   <li><b>AVG of floats</b> multiplies every input by {@code 1/N} before summing ({@code FuncPreMulSum}), not
 *       "sum, then divide by N": the last bit can differ.</li>
 *   <li><b>MAX</b> is {@code fmaxf}: a NaN loses against a number (Java's {@code Math.max} returns NaN).</li>
 * </ul>
 * The order in which NCCL adds the ranks' values depends on its algorithm choice (ring, tree, NVLS), so results are
 * reproducible on one topology but not bit-identical to {@link RingCommunicator}. {@link #ringAllReduceAsync} is an
 * explicit ring (the same algorithm as {@link RingCommunicator}) from {@code ncclSend}/{@code ncclRecv}, for fp32.
 *
 * <h2>Chunks</h2>
 * {@code reduceScatter} and {@code allGather} split {@code count} as {@link Chunks} says. When {@code N} divides
 * {@code count} they are {@code ncclReduceScatter}/{@code ncclAllGather}; otherwise (NCCL needs equal blocks) a group
 * of {@code N} {@code ncclReduce}s, one per chunk to its owner, or {@code N} {@code ncclBroadcast}s from each owner.
 * Data-movement collectives move bytes ({@code ncclUint8}), so they take every dtype. A barrier is a one-float
 * all-reduce.
 */
public final class NcclCommunicator implements Communicator {

    /** Polling: spin this long after issue, then sleep in growing steps up to {@link #MAX_SLEEP_NANOS}. */
    private static final long SPIN_NANOS = 20_000L;
    private static final long MAX_SLEEP_NANOS = 1_000_000L;

    private final CudaContext context;
    private final NcclComm comm;
    private final Stream stream;
    private final Duration timeout;
    private final DeviceBuffer barrierScratch;
    /** Recorded on the default stream before each collective, which the stream then waits for. */
    private final Event kernelsDone;
    private NcclRing ring; // created on the first ringAllReduce
    /** The host communicator of the same ranks, over which splits agree on their ids (null: cannot split). */
    private Communicator host;
    /** Whether {@link #host} is this communicator's to close (a split's host group). */
    private boolean ownsHost;
    private Op last;
    private CollectiveException broken;
    private boolean closed;

    private NcclCommunicator(CudaContext context, NcclComm comm, Duration timeout) {
        this.context = context;
        this.comm = comm;
        this.timeout = timeout;
        Stream s = null;
        DeviceBuffer b = null;
        Event e = null;
        try {
            s = context.createStream();
            b = context.allocate(Float.BYTES);
            e = context.createEvent(false);
        } catch (RuntimeException failure) {
            if (b != null) {
                b.close();
            }
            if (s != null) {
                s.close();
            }
            comm.close();
            throw failure;
        }
        this.stream = s;
        this.barrierScratch = b;
        this.kernelsDone = e;
    }

    /**
     * Joins the NCCL communicator as {@code rank} of {@code size} on {@code context}'s device (which stays the
     * caller's to close, after this): rank 0 makes the unique id and {@code rendezvous} hands it to the others, then
     * {@code ncclCommInitRankConfig} with {@code config} (null: NCCL's defaults) — blocking until every rank has joined.
     */
    public static NcclCommunicator create(CudaContext context, int rank, int size, NcclRendezvous rendezvous,
                                          NcclConfig config, Duration timeout) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(rendezvous, "rendezvous");
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + " ranks");
        }
        byte[] id = rendezvous.exchange(NcclComm::uniqueId);
        return new NcclCommunicator(context, NcclComm.initRank(context, size, id, rank,
                config == null ? NcclConfig.defaults() : config), timeout);
    }

    /** Wraps an initialised {@code comm} (closed with this communicator). */
    public static NcclCommunicator wrap(CudaContext context, NcclComm comm, Duration timeout) {
        return new NcclCommunicator(Objects.requireNonNull(context, "context"), Objects.requireNonNull(comm, "comm"),
                Objects.requireNonNull(timeout, "timeout"));
    }

    /**
     * Gives this communicator a host communicator of the same ranks (the same rank and size; MPI's world, an
     * in-process group's, …), which {@link #split} uses to agree on its groups; it stays the caller's. Returns this.
     */
    public NcclCommunicator withHost(Communicator host) {
        Objects.requireNonNull(host, "host");
        if (host.size() != size() || host.rank() != rank() || host.deviceBuffers()) {
            throw new IllegalArgumentException("the host communicator of an NCCL communicator must be a host one of "
                    + "the same ranks: NCCL rank " + rank() + " of " + size() + ", host rank " + host.rank() + " of "
                    + host.size() + (host.deviceBuffers() ? " (device buffers)" : ""));
        }
        this.host = host;
        return this;
    }

    /**
     * A new NCCL communicator per group ({@code ncclCommInitRank} on this context): the host communicator is split
     * alike and the group's rank 0 broadcasts its unique id within its host group ({@link NcclGroupId}). Needs
     * {@link #withHost}; the new communicator owns its host group and closes it.
     */
    @Override
    public Communicator split(int color, int key) {
        if (host == null) {
            throw new UnsupportedOperationException("an NCCL split hands out the new group's id over a host "
                    + "communicator: call withHost(host) first");
        }
        NcclGroupId g = NcclGroupId.agree(host, color, key, NcclComm::uniqueId);
        NcclCommunicator c;
        try {
            c = new NcclCommunicator(context, NcclComm.initRank(context, g.hostGroup().size(), g.id(),
                    g.hostGroup().rank(), NcclConfig.defaults()), timeout);
        } catch (RuntimeException | Error e) {
            g.hostGroup().close();
            throw e;
        }
        c.host = g.hostGroup();
        c.ownsHost = true;
        return c;
    }

    @Override
    public int rank() {
        return comm.rank();
    }

    /** True: every buffer is a device view of this communicator's GPU. */
    @Override
    public boolean deviceBuffers() {
        return true;
    }

    @Override
    public int size() {
        return comm.size();
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    /** The stream the collectives are queued on (to order the caller's kernels after them without a host wait). */
    public Stream stream() {
        return stream;
    }

    // ---------------------------------------------------------------- the collectives

    @Override
    public Pending allReduceAsync(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        CollectiveArgs.reduce(buf, count, dtype, op);
        int type = ncclType(dtype);
        return issue("allReduce", () -> {
            if (count > 0) {
                comm.allReduce(buf, buf, count, type, ncclOp(op), stream);
            }
        });
    }

    /**
     * {@link #allReduceAsync} as an explicit ring on fp32: reduce-scatter then all-gather over {@code N} chunks
     * ({@link Chunks}), each step one {@code ncclSend} to the right and one {@code ncclRecv} from the left in a
     * group, the received chunk combined by {@code ring.cu}'s kernel; AVG divides the owned chunk by {@code N} once.
     * The order of additions is {@link RingCommunicator}'s, so sums match it bit for bit; MAX is Java's.
     */
    public Pending ringAllReduceAsync(MemorySegment buf, long count, ReduceOp op) {
        CollectiveArgs.reduce(buf, count, DType.FP32, op);
        return issue("ringAllReduce", () -> {
            if (ring == null) {
                ring = new NcclRing(context, comm, stream);
            }
            ring.allReduce(buf, count, op);
        });
    }

    /** {@link #ringAllReduceAsync} and wait. */
    public void ringAllReduce(MemorySegment buf, long count, ReduceOp op) {
        ringAllReduceAsync(buf, count, op).await();
    }

    @Override
    public Pending reduceScatterAsync(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        CollectiveArgs.reduceScatter(send, recv, count, dtype, op, rank(), size());
        int type = ncclType(dtype);
        int b = dtype.byteSize();
        int n = size();
        return issue("reduceScatter", () -> {
            if (count % n == 0) {
                if (count > 0) {
                    comm.reduceScatter(send, recv, count / n, type, ncclOp(op), stream);
                }
                return;
            }
            NcclComm.group(() -> {
                for (int q = 0; q < n; q++) {
                    long len = Chunks.length(count, n, q);
                    if (len > 0) {
                        comm.reduce(send.asSlice(Chunks.start(count, n, q) * b), recv, len, type, ncclOp(op), q,
                                stream);
                    }
                }
            });
        });
    }

    @Override
    public Pending allGatherAsync(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        CollectiveArgs.allGather(send, recv, count, dtype, rank(), size());
        int b = dtype.byteSize();
        int n = size();
        return issue("allGather", () -> {
            if (count % n == 0) {
                if (count > 0) {
                    comm.allGather(send, recv, count / n * b, nccl_h.ncclUint8, stream);
                }
                return;
            }
            NcclComm.group(() -> {
                for (int q = 0; q < n; q++) {
                    long len = Chunks.length(count, n, q);
                    if (len > 0) {
                        MemorySegment slot = recv.asSlice(Chunks.start(count, n, q) * b);
                        comm.broadcast(q == rank() ? send : slot, slot, len * b, nccl_h.ncclUint8, q, stream);
                    }
                }
            });
        });
    }

    @Override
    public Pending broadcastAsync(MemorySegment buf, long count, DType dtype, int root) {
        CollectiveArgs.broadcast(buf, count, dtype, root, size());
        return issue("broadcast", () -> {
            if (count > 0) {
                comm.broadcast(buf, buf, count * dtype.byteSize(), nccl_h.ncclUint8, root, stream);
            }
        });
    }

    @Override
    public Pending barrierAsync() {
        MemorySegment one = GpuOps.device(barrierScratch);
        return issue("barrier", () -> comm.allReduce(one, one, 1, nccl_h.ncclFloat32, nccl_h.ncclSum, stream));
    }

    @Override
    public Pending sendAsync(MemorySegment buf, long count, DType dtype, int peer) {
        CollectiveArgs.peer(buf, count, dtype, peer, rank(), size());
        return issue("send", () -> comm.send(buf, count * dtype.byteSize(), nccl_h.ncclUint8, peer, stream));
    }

    @Override
    public Pending recvAsync(MemorySegment buf, long count, DType dtype, int peer) {
        CollectiveArgs.peer(buf, count, dtype, peer, rank(), size());
        return issue("recv", () -> comm.recv(buf, count * dtype.byteSize(), nccl_h.ncclUint8, peer, stream));
    }

    /** Destroys the NCCL communicator (aborts it when a collective is still in flight), then the stream. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (!comm.isClosed()) {
                if (last != null && !last.isDone()) {
                    comm.abort(); // kernels still running would never finish without their peers
                } else {
                    comm.close();
                }
            }
        } finally {
            try {
                if (ring != null) {
                    ring.close();
                }
            } finally {
                try {
                    barrierScratch.close();
                    kernelsDone.close();
                } finally {
                    try {
                        stream.close();
                    } finally {
                        if (ownsHost) {
                            host.close();
                        }
                    }
                }
            }
        }
    }

    // ---------------------------------------------------------------- issuing and waiting

    private synchronized Op issue(String what, Runnable enqueue) {
        if (closed) {
            throw new IllegalStateException(what + " on rank " + rank() + ": the communicator is closed");
        }
        if (broken != null) {
            throw new CollectiveException(what, broken.culprits(), Duration.ZERO, what + " on rank " + rank()
                    + " of " + size() + ": the communicator is broken by an earlier failure: " + broken.getMessage(),
                    broken);
        }
        long now = System.nanoTime();
        long start = last == null || last.isDone() ? now : Math.max(now, last.deadline);
        Event event = null;
        try {
            kernelsDone.record(null); // the default stream's work so far, which the collective may read
            kernelsDone.waitOn(stream);
            enqueue.run();
            event = context.createEvent(false);
            event.record(stream);
        } catch (RuntimeException e) {
            if (event != null) {
                event.close();
            }
            throw failed(what, now, "could not be queued: " + e.getMessage(), e);
        }
        Op op = new Op(what, now, start + timeout.toNanos(), event);
        last = op;
        return op;
    }

    /** Marks the communicator broken, aborting NCCL (pending work may never finish), and returns the exception. */
    private synchronized CollectiveException failed(String what, long issued, String why, Throwable cause) {
        CollectiveException e = new CollectiveException(what, List.of(), Duration.ofNanos(System.nanoTime() - issued),
                what + " on rank " + rank() + " of " + size() + " (NCCL) " + why + " after "
                        + CollectiveException.seconds(System.nanoTime() - issued), cause);
        if (broken == null) {
            broken = e;
        }
        if (!comm.isClosed()) {
            try {
                comm.abort();
            } catch (RuntimeException abortFailed) {
                e.addSuppressed(abortFailed);
            }
        }
        return e;
    }

    /** One queued collective: its event, its deadline. */
    private final class Op implements Pending {
        final String what;
        final long issued;
        final long deadline;
        private final Event event;
        private volatile boolean done;
        private CollectiveException failure;

        Op(String what, long issued, long deadline, Event event) {
            this.what = what;
            this.issued = issued;
            this.deadline = deadline;
            this.event = event;
        }

        @Override
        public synchronized void await() {
            if (done) {
                if (failure != null) {
                    throw failure;
                }
                return;
            }
            long sleep = 1_000L;
            try {
                while (true) {
                    if (event.query()) {
                        finish(null);
                        return;
                    }
                    int async = !comm.isClosed() ? comm.asyncError() : nccl_h.ncclSuccess;
                    if (async != nccl_h.ncclSuccess && async != nccl_h.ncclInProgress) {
                        throw finish(failed(what, issued, "failed: asynchronous error " + NcclComm.resultName(async),
                                null));
                    }
                    if (!!comm.isClosed()) {
                        throw finish(failed(what, issued, "was aborted", null));
                    }
                    long now = System.nanoTime();
                    if (now - deadline > 0) {
                        throw finish(failed(what, issued, "timed out (timeout " + timeout + "): ncclCommAbort called",
                                null));
                    }
                    if (now - issued < SPIN_NANOS) {
                        Thread.onSpinWait();
                    } else {
                        LockSupport.parkNanos(Math.min(sleep, deadline - now));
                        sleep = Math.min(2 * sleep, MAX_SLEEP_NANOS);
                    }
                }
            } catch (CollectiveException e) {
                throw e;
            } catch (RuntimeException e) {
                throw finish(failed(what, issued, "failed: " + e.getMessage(), e));
            }
        }

        private CollectiveException finish(CollectiveException f) {
            failure = f;
            done = true;
            event.close();
            return f;
        }

        @Override
        public boolean isDone() {
            if (done) {
                return true;
            }
            try {
                return event.query(); // await() still reports the outcome
            } catch (RuntimeException e) {
                return done; // closed by a concurrent await (done is set first), or a failure await will report
            }
        }
    }

    // ---------------------------------------------------------------- argument checks

    /** The NCCL data type of a reducible dtype (checked by {@link CollectiveArgs#reducible} first). */
    private static int ncclType(DType dtype) {
        return dtype == DType.BF16 ? nccl_h.ncclBfloat16 : nccl_h.ncclFloat32;
    }

    static int ncclOp(ReduceOp op) {
        return switch (op) {
            case SUM -> nccl_h.ncclSum;
            case AVG -> nccl_h.ncclAvg;
            case MAX -> nccl_h.ncclMax;
        };
    }
}
