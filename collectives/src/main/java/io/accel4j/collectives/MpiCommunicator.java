package io.accel4j.collectives;

import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.mpi_h;
import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;

/**
 * {@code MPI_COMM_WORLD} of Open MPI as a {@link Communicator}, for processes started by
 * {@code mpirun -np N java …} (as root add {@code --allow-run-as-root}; in containers
 * {@code --mca btl_vader_single_copy_mechanism none} avoids ptrace-based copies).
 *
 * <p>Same semantics and chunking ({@link Chunks}) as the ring. fp32 reductions call {@code MPI_Allreduce} /
 * {@code MPI_Reduce_scatter} on {@code MPI_FLOAT} (summation order is Open MPI's, so results may differ from the
 * ring's in the last bits); bf16 is widened to an fp32 scratch buffer, reduced there and rounded back once; AVG is
 * {@code MPI_SUM} followed by one fp32 division by N. Data movement uses {@code MPI_BYTE}. Limits: buffers must be
 * off-heap and shared (every call runs on this communicator's queue thread, so that a hung MPI call can be timed
 * out), and every per-call byte or element count must fit an {@code int}.
 *
 * <p>Failures: every status code is checked and turned into a {@link CollectiveException} carrying
 * {@code MPI_Error_string} (errors are set to return, not abort). MPI cannot cancel a call: after a timeout the
 * communicator is broken and the process should exit (a process that dies makes {@code mpirun} stop the others).
 * {@link #close()} calls {@code MPI_Finalize} if this communicator initialized MPI and no collective is stuck.
 */
public final class MpiCommunicator extends AbstractCommunicator {

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;

    private final MemorySegment comm;
    private final boolean initializedHere;
    /** For a communicator made by {@link #split}: its group, named in failures, and freed on close; else null. */
    private final String group;
    /** The thread level MPI provides (splits need {@code MPI_THREAD_MULTIPLE}: each communicator has its thread). */
    private final int threadLevel;

    private MpiCommunicator(int rank, int size, Duration timeout, boolean initializedHere, int threadLevel) {
        this(mpi_h.ompi_mpi_comm_world(), rank, size, timeout, initializedHere, threadLevel, null);
    }

    private MpiCommunicator(MemorySegment comm, int rank, int size, Duration timeout, boolean initializedHere,
                            int threadLevel, String group) {
        super(rank, size, timeout);
        this.comm = comm;
        this.initializedHere = initializedHere;
        this.threadLevel = threadLevel;
        this.group = group;
    }

    /** Whether Open MPI's library can be loaded; {@link MpiLibrary#unavailableReason()} says why not. */
    public static boolean available() {
        return MpiLibrary.available();
    }

    /**
     * The library's own description from {@code MPI_Get_library_version} (callable before {@code MPI_Init}), e.g.
     * {@code "Open MPI v4.1.4, package: Debian OpenMPI, …"}; {@link IllegalStateException} when it cannot be loaded.
     */
    public static String libraryVersion() {
        if (!MpiLibrary.available()) {
            throw new IllegalStateException(MpiLibrary.unavailableReason());
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(mpi_h.MPI_MAX_LIBRARY_VERSION_STRING + 1);
            MemorySegment len = a.allocate(INT);
            check("MPI_Get_library_version", mpi_h.MPI_Get_library_version(s, len), -1);
            return s.getString(0).strip();
        }
    }

    /** {@code MPI_COMM_WORLD} with {@link Communicator#DEFAULT_TIMEOUT}, initializing MPI if needed. */
    public static MpiCommunicator world() {
        return world(DEFAULT_TIMEOUT);
    }

    /** {@code MPI_COMM_WORLD}, initializing MPI ({@code MPI_THREAD_SERIALIZED}) if no one has. */
    public static synchronized MpiCommunicator world(Duration timeout) {
        if (!MpiLibrary.available()) {
            throw new IllegalStateException(MpiLibrary.unavailableReason());
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment flag = a.allocate(INT);
            check("MPI_Finalized", mpi_h.MPI_Finalized(flag), -1);
            if (flag.get(INT, 0) != 0) {
                throw new IllegalStateException("MPI has already been finalized in this process");
            }
            check("MPI_Initialized", mpi_h.MPI_Initialized(flag), -1);
            boolean here = flag.get(INT, 0) == 0;
            int level = mpi_h.MPI_THREAD_SERIALIZED;
            if (here) { // MULTIPLE where provided (split communicators call MPI from their own threads)
                MemorySegment provided = a.allocate(INT);
                check("MPI_Init_thread", mpi_h.MPI_Init_thread(MemorySegment.NULL, MemorySegment.NULL,
                        mpi_h.MPI_THREAD_MULTIPLE, provided), -1);
                level = provided.get(INT, 0);
                if (level < mpi_h.MPI_THREAD_SERIALIZED) {
                    throw new IllegalStateException("MPI_Init_thread: this Open MPI provides thread level "
                            + level + ", accel4j needs MPI_THREAD_SERIALIZED (2)");
                }
            }
            MemorySegment world = mpi_h.ompi_mpi_comm_world();
            check("MPI_Comm_set_errhandler", mpi_h.MPI_Comm_set_errhandler(world, mpi_h.ompi_mpi_errors_return()),
                    -1);
            MemorySegment v = a.allocate(INT);
            check("MPI_Comm_rank", mpi_h.MPI_Comm_rank(world, v), -1);
            int rank = v.get(INT, 0);
            check("MPI_Comm_size", mpi_h.MPI_Comm_size(world, v), rank);
            return new MpiCommunicator(rank, v.get(INT, 0), timeout, here, level);
        }
    }

    /**
     * {@code MPI_Comm_split} of this communicator: a collective, run in order with this communicator's others. The
     * new communicator's calls run on its own thread, so MPI must provide {@code MPI_THREAD_MULTIPLE} (asked for when
     * this process initialized MPI); it is freed ({@code MPI_Comm_free}) when closed, and names its group in failures.
     */
    @Override
    public Communicator split(int color, int key) {
        if (color < 0) {
            throw new IllegalArgumentException("split: color must be >= 0, got " + color + " on rank " + rank());
        }
        if (threadLevel < mpi_h.MPI_THREAD_MULTIPLE) {
            throw new IllegalStateException("split: this Open MPI provides thread level " + threadLevel
                    + ", split communicators need MPI_THREAD_MULTIPLE (3): each runs its calls on its own thread");
        }
        MemorySegment[] made = new MemorySegment[1];
        int[] rs = new int[2];
        Pending p = runOnQueue("split", () -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment out = a.allocate(ValueLayout.ADDRESS);
                ok("MPI_Comm_split", mpi_h.MPI_Comm_split(comm, color, key, out));
                MemorySegment c = out.get(ValueLayout.ADDRESS, 0);
                ok("MPI_Comm_set_errhandler", mpi_h.MPI_Comm_set_errhandler(c, mpi_h.ompi_mpi_errors_return()));
                MemorySegment v = a.allocate(INT);
                ok("MPI_Comm_rank", mpi_h.MPI_Comm_rank(c, v));
                rs[0] = v.get(INT, 0);
                ok("MPI_Comm_size", mpi_h.MPI_Comm_size(c, v));
                rs[1] = v.get(INT, 0);
                made[0] = c;
            }
        });
        p.await();
        String name = "color " + color + " (" + rs[1] + " ranks" + (group == null ? " of MPI_COMM_WORLD" : " of "
                + group) + ")";
        return new MpiCommunicator(made[0], rs[0], rs[1], timeout(), false, threadLevel, name);
    }

    @Override
    protected String groupName() {
        return group;
    }

    @Override
    protected boolean blockingInline() {
        return false; // a native MPI call cannot be interrupted: run it on the queue thread and time out the wait
    }

    @Override
    protected void runAllReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        int n = fits("count", count);
        if (dtype == DType.FP32) {
            ok("MPI_Allreduce", mpi_h.MPI_Allreduce(mpi_h.MPI_IN_PLACE, raw(buf), n, mpi_h.ompi_mpi_float(),
                    mpiOp(op), comm));
            average(buf, count, op);
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment tmp = a.allocate(Math.max(1, count) * Float.BYTES, 64);
            Casts.bf16ToF32(tmp, 0, buf, 0, count);
            ok("MPI_Allreduce", mpi_h.MPI_Allreduce(mpi_h.MPI_IN_PLACE, raw(tmp), n, mpi_h.ompi_mpi_float(),
                    mpiOp(op), comm));
            average(tmp, count, op);
            Casts.f32ToBf16(buf, 0, tmp, 0, count);
        }
    }

    @Override
    protected void runReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        fits("count", count);
        long mine = Chunks.length(count, size(), rank());
        try (Arena a = Arena.ofConfined()) {
            MemorySegment counts = a.allocate(INT, size());
            for (int q = 0; q < size(); q++) {
                counts.setAtIndex(INT, q, (int) Chunks.length(count, size(), q));
            }
            MemorySegment s = send, r = recv;
            if (dtype == DType.BF16) {
                s = a.allocate(Math.max(1, count) * Float.BYTES, 64);
                r = a.allocate(Math.max(1, mine) * Float.BYTES, 64);
                Casts.bf16ToF32(s, 0, send, 0, count);
            }
            ok("MPI_Reduce_scatter", mpi_h.MPI_Reduce_scatter(raw(s), raw(r), counts, mpi_h.ompi_mpi_float(),
                    mpiOp(op), comm));
            average(r, mine, op);
            if (dtype == DType.BF16) {
                Casts.f32ToBf16(recv, 0, r, 0, mine);
            }
        }
    }

    @Override
    protected void runAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        int b = dtype.byteSize();
        fits("count × element size", count * b);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment counts = a.allocate(INT, size()), displs = a.allocate(INT, size());
            for (int q = 0; q < size(); q++) {
                counts.setAtIndex(INT, q, (int) (Chunks.length(count, size(), q) * b));
                displs.setAtIndex(INT, q, (int) (Chunks.start(count, size(), q) * b));
            }
            boolean inPlace = inPlaceGather(send, recv, count, dtype);
            ok("MPI_Allgatherv", mpi_h.MPI_Allgatherv(inPlace ? mpi_h.MPI_IN_PLACE : raw(send),
                    (int) (Chunks.length(count, size(), rank()) * b), mpi_h.ompi_mpi_byte(), raw(recv), counts,
                    displs, mpi_h.ompi_mpi_byte(), comm));
        }
    }

    @Override
    protected void runBroadcast(MemorySegment buf, long count, DType dtype, int root) {
        int bytes = fits("count × element size", count * dtype.byteSize());
        ok("MPI_Bcast", mpi_h.MPI_Bcast(raw(buf), bytes, mpi_h.ompi_mpi_byte(), root, comm));
    }

    @Override
    protected void runBarrier() {
        ok("MPI_Barrier", mpi_h.MPI_Barrier(comm));
    }

    @Override
    protected void runSend(MemorySegment buf, long count, DType dtype, int peer) {
        int bytes = fits("count × element size", count * dtype.byteSize());
        ok("MPI_Send", mpi_h.MPI_Send(raw(buf), bytes, mpi_h.ompi_mpi_byte(), peer, 0, comm));
    }

    @Override
    protected void runRecv(MemorySegment buf, long count, DType dtype, int peer) {
        int bytes = fits("count × element size", count * dtype.byteSize());
        ok("MPI_Recv", mpi_h.MPI_Recv(raw(buf), bytes, mpi_h.ompi_mpi_byte(), peer, 0, comm,
                mpi_h.MPI_STATUS_IGNORE));
    }

    @Override
    protected void onClose(boolean midCollective) {
        if (group != null && !midCollective) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment h = a.allocate(ValueLayout.ADDRESS);
                h.set(ValueLayout.ADDRESS, 0, comm);
                check("MPI_Comm_free", mpi_h.MPI_Comm_free(h), rank());
            }
            return;
        }
        if (!initializedHere || midCollective) {
            return; // a stuck call still uses MPI; finalizing now could hang
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment flag = a.allocate(INT);
            check("MPI_Finalized", mpi_h.MPI_Finalized(flag), rank());
            if (flag.get(INT, 0) == 0) {
                check("MPI_Finalize", mpi_h.MPI_Finalize(), rank());
            }
        }
    }

    // ---------------------------------------------------------------- helpers

    private void average(MemorySegment f32, long count, ReduceOp op) {
        if (op == ReduceOp.AVG && size() > 1) {
            Reduce.divide(f32, 0, count, size());
        }
    }

    private static MemorySegment mpiOp(ReduceOp op) {
        return op == ReduceOp.MAX ? mpi_h.ompi_mpi_op_max() : mpi_h.ompi_mpi_op_sum();
    }

    /** The segment's address without its scope (the queue thread passes it to native code). */
    /**
     * This rank's {@link Mailbox} on the same communicator (asynchronous data parallelism): messages of its own tag,
     * received from any rank; the communicator's collectives must not run while it is open.
     */
    public Mailbox mailbox() {
        return new MpiMailbox(comm, rank(), size());
    }

    private static MemorySegment raw(MemorySegment seg) {
        if (!seg.isNative()) {
            throw new IllegalArgumentException("the MPI backend needs off-heap segments, got a heap segment");
        }
        return MemorySegment.ofAddress(seg.address());
    }

    private static int fits(String what, long v) {
        if (v > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("MPI takes int counts: " + what + " = " + v + " exceeds 2^31 − 1");
        }
        return (int) v;
    }

    private void ok(String call, int rc) {
        ok(call, rc, true);
    }

    /** Throws a {@link CollectiveException} with {@code MPI_Error_string} unless {@code rc} is MPI_SUCCESS. */
    private void ok(String call, int rc, boolean named) {
        if (rc != mpi_h.MPI_SUCCESS && group != null) {
            throw new CollectiveException(call, List.of(), Duration.ZERO, call + " failed on rank " + rank()
                    + " of group " + group + ": MPI error " + rc + ": " + errorString(rc), null);
        }
        check(call, rc, rank());
    }

    static void check(String call, int rc, int rank) {
        if (rc == mpi_h.MPI_SUCCESS) {
            return;
        }
        throw new CollectiveException(call, List.of(), Duration.ZERO, call + " failed" + (rank >= 0 ? " on rank "
                + rank : "") + ": MPI error " + rc + ": " + errorString(rc), null);
    }

    static String errorString(int rc) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(mpi_h.MPI_MAX_ERROR_STRING + 1);
            MemorySegment len = a.allocate(INT);
            if (mpi_h.MPI_Error_string(rc, s, len) != mpi_h.MPI_SUCCESS) {
                return "(no message)";
            }
            return s.getString(0);
        }
    }
}
