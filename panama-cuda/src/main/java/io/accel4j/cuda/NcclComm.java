package io.accel4j.cuda;

import io.accel4j.cuda.bindings.nccl_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * An NCCL communicator ({@code ncclCommInitRank}), destroyed by {@link #close()} (or torn down by {@link #abort()}).
 * Rank 0 makes the id with {@link #uniqueId()} and hands the 128 bytes to the others (MPI, a file, a socket); every
 * rank then calls {@link #initRank} with its context current. Collectives are queued on a {@link Stream};
 * counts are elements of {@code dataType} ({@code nccl_h.ncclFloat32}, {@code ncclBfloat16}, …).
 */
public final class NcclComm extends NativeResource {

    private static final List<String> RESULT_NAMES = List.of("ncclSuccess", "ncclUnhandledCudaError",
            "ncclSystemError", "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError",
            "ncclInProgress", "ncclTimeout");

    private final CudaContext context;
    private final MemorySegment comm;
    private final int rank;
    private final int nranks;
    private boolean aborting;

    private NcclComm(CudaContext context, MemorySegment comm, int rank, int nranks) {
        this.context = context;
        this.comm = comm;
        this.rank = rank;
        this.nranks = nranks;
    }

    /** A new id ({@code ncclGetUniqueId}), {@value nccl_h#NCCL_UNIQUE_ID_BYTES} bytes. */
    public static byte[] uniqueId() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment id = arena.allocate(nccl_h.ncclUniqueId);
            check("ncclGetUniqueId", nccl_h.ncclGetUniqueId(id));
            return id.toArray(ValueLayout.JAVA_BYTE);
        }
    }

    /** The library's version code ({@code ncclGetVersion}): 22803 for 2.28.3. */
    public static int version() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(ValueLayout.JAVA_INT);
            check("ncclGetVersion", nccl_h.ncclGetVersion(v));
            return v.get(ValueLayout.JAVA_INT, 0);
        }
    }

    /** 22803 → {@code "2.28.3"} (codes below 2900 are the old {@code X·1000 + Y·100 + Z} form). */
    public static String versionString(int code) {
        return code < 2900 ? code / 1000 + "." + code / 100 % 10 + "." + code % 100
                : code / 10000 + "." + code / 100 % 100 + "." + code % 100;
    }

    /** Joins the communicator {@code id} as {@code rank} of {@code nranks}, on {@code context}'s device. */
    public static NcclComm initRank(CudaContext context, int nranks, byte[] id, int rank) {
        return initRank(context, nranks, id, rank, null);
    }

    /**
     * {@link #initRank(CudaContext, int, byte[], int)} with {@code config} ({@code ncclCommInitRankConfig}); a null
     * config is {@code ncclCommInitRank}. A non-blocking config is refused: this class does not poll
     * {@code ncclInProgress}.
     */
    public static NcclComm initRank(CudaContext context, int nranks, byte[] id, int rank, NcclConfig config) {
        if (config != null && config.blocking() == 0) {
            throw new IllegalArgumentException("a non-blocking NCCL config is not supported (blocking = 0)");
        }
        if (id.length != nccl_h.NCCL_UNIQUE_ID_BYTES) {
            throw new IllegalArgumentException("id must be " + nccl_h.NCCL_UNIQUE_ID_BYTES + " bytes, got " + id.length);
        }
        if (nranks < 1 || rank < 0 || rank >= nranks) {
            throw new IllegalArgumentException("rank " + rank + " of " + nranks + " ranks");
        }
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pcomm = arena.allocate(ValueLayout.ADDRESS);
            MemorySegment idValue = arena.allocate(nccl_h.ncclUniqueId);
            idValue.copyFrom(MemorySegment.ofArray(id));
            if (config == null) {
                check("ncclCommInitRank", nccl_h.ncclCommInitRank(pcomm, nranks, idValue, rank));
            } else {
                check("ncclCommInitRankConfig", nccl_h.ncclCommInitRankConfig(pcomm, nranks, idValue, rank,
                        config.write(arena)));
            }
            return new NcclComm(context, pcomm.get(ValueLayout.ADDRESS, 0), rank, nranks);
        }
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return nranks;
    }

    /** {@code recv = op over ranks of send}, {@code count} elements; in place when {@code send == recv}. */
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, long count, int dataType, int op, Stream stream) {
        allReduce(ptr(send), ptr(recv), count, dataType, op, stream);
    }

    /**
     * {@link #allReduce(DeviceBuffer, DeviceBuffer, long, int, int, Stream)} on device views: segments whose address
     * is a device address (only the address is used; NCCL checks nothing about sizes).
     */
    public void allReduce(MemorySegment send, MemorySegment recv, long count, int dataType, int op, Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclAllReduce", nccl_h.ncclAllReduce(send, recv, count, dataType, op, comm, Stream.handle(stream)));
    }

    /** Rank i receives block i ({@code recvCount} elements) of the reduction of the ranks' {@code send}. */
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, long recvCount, int dataType, int op,
                              Stream stream) {
        reduceScatter(ptr(send), ptr(recv), recvCount, dataType, op, stream);
    }

    /** {@link #reduceScatter(DeviceBuffer, DeviceBuffer, long, int, int, Stream)} on device views. */
    public void reduceScatter(MemorySegment send, MemorySegment recv, long recvCount, int dataType, int op,
                              Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclReduceScatter", nccl_h.ncclReduceScatter(send, recv, recvCount, dataType, op, comm,
                Stream.handle(stream)));
    }

    /** {@code root}'s {@code recv} gets the reduction of the ranks' {@code send} ({@code count} elements). */
    public void reduce(MemorySegment send, MemorySegment recv, long count, int dataType, int op, int root,
                       Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclReduce", nccl_h.ncclReduce(send, recv, count, dataType, op, root, comm, Stream.handle(stream)));
    }

    /** {@code recv} gets every rank's {@code sendCount} elements, rank i's at offset {@code i·sendCount}. */
    public void allGather(DeviceBuffer send, DeviceBuffer recv, long sendCount, int dataType, Stream stream) {
        allGather(ptr(send), ptr(recv), sendCount, dataType, stream);
    }

    /** {@link #allGather(DeviceBuffer, DeviceBuffer, long, int, Stream)} on device views. */
    public void allGather(MemorySegment send, MemorySegment recv, long sendCount, int dataType, Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclAllGather", nccl_h.ncclAllGather(send, recv, sendCount, dataType, comm, Stream.handle(stream)));
    }

    /** Copies {@code root}'s {@code send} into every rank's {@code recv}. */
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, long count, int dataType, int root, Stream stream) {
        broadcast(ptr(send), ptr(recv), count, dataType, root, stream);
    }

    /** {@link #broadcast(DeviceBuffer, DeviceBuffer, long, int, int, Stream)} on device views. */
    public void broadcast(MemorySegment send, MemorySegment recv, long count, int dataType, int root,
                          Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclBroadcast", nccl_h.ncclBroadcast(send, recv, count, dataType, root, comm, Stream.handle(stream)));
    }

    /** Point-to-point send to {@code peer} (pair with its {@link #recv}; group both sides with {@link #group}). */
    public void send(DeviceBuffer buf, long count, int dataType, int peer, Stream stream) {
        send(ptr(buf), count, dataType, peer, stream);
    }

    /** {@link #send(DeviceBuffer, long, int, int, Stream)} on a device view. */
    public void send(MemorySegment buf, long count, int dataType, int peer, Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclSend", nccl_h.ncclSend(buf, count, dataType, peer, comm, Stream.handle(stream)));
    }

    public void recv(DeviceBuffer buf, long count, int dataType, int peer, Stream stream) {
        recv(ptr(buf), count, dataType, peer, stream);
    }

    /** {@link #recv(DeviceBuffer, long, int, int, Stream)} on a device view. */
    public void recv(MemorySegment buf, long count, int dataType, int peer, Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("ncclRecv", nccl_h.ncclRecv(buf, count, dataType, peer, comm, Stream.handle(stream)));
    }

    /** Runs {@code calls} between {@code ncclGroupStart} and {@code ncclGroupEnd}. */
    public static void group(Runnable calls) {
        check("ncclGroupStart", nccl_h.ncclGroupStart());
        try {
            calls.run();
        } finally {
            check("ncclGroupEnd", nccl_h.ncclGroupEnd());
        }
    }

    /** The communicator's asynchronous error ({@code ncclSuccess} when none). */
    public int asyncError() {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment e = arena.allocate(ValueLayout.JAVA_INT);
            check("ncclCommGetAsyncError", nccl_h.ncclCommGetAsyncError(comm, e));
            return e.get(ValueLayout.JAVA_INT, 0);
        }
    }

    /** Tears the communicator down without waiting for pending work ({@code ncclCommAbort}); closes it. */
    public void abort() {
        ensureOpen();
        aborting = true;
        close();
    }

    private static MemorySegment ptr(DeviceBuffer b) {
        return MemorySegment.ofAddress(b.address());
    }

    /** {@code ncclRemoteError} for 6; {@code "ncclResult 42"} for a code this class does not know. */
    public static String resultName(int status) {
        return status >= 0 && status < RESULT_NAMES.size() ? RESULT_NAMES.get(status) : "ncclResult " + status;
    }

    @SuppressWarnings("restricted") // reinterpret: NCCL returns a NUL-terminated static string
    static void check(String call, int status) {
        if (status != nccl_h.ncclSuccess) {
            String name = resultName(status);
            String message;
            try {
                MemorySegment s = nccl_h.ncclGetErrorString(status);
                message = s.equals(MemorySegment.NULL) ? "(unknown)" : s.reinterpret(4096).getString(0);
            } catch (RuntimeException e) {
                message = "(unknown: " + e.getMessage() + ")";
            }
            throw new CudaException(call, status, name, message);
        }
    }

    @Override
    String describe() {
        return "NcclComm(rank " + rank + " of " + nranks + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        if (aborting) {
            check("ncclCommAbort", nccl_h.ncclCommAbort(comm));
        } else {
            check("ncclCommDestroy", nccl_h.ncclCommDestroy(comm));
        }
    }
}
