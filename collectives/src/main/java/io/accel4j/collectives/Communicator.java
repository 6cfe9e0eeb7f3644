package io.accel4j.collectives;

import io.accel4j.core.DType;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * A group of {@link #size()} ranks that reduce, scatter, gather and exchange buffers together (MPI's communicator).
 * Every rank calls the same collectives in the same order with the same {@code count}, {@code dtype} and
 * {@code op}/{@code root}; a mismatch is detected where the backend can and fails as a {@link CollectiveException}.
 *
 * <h2>Buffers</h2>
 * Host memory (device memory where {@link #deviceBuffers()} says so), little-endian, element {@code i} at byte
 * {@code i·dtype.byteSize()}. Reductions accept {@link DType#FP32}
 * and {@link DType#BF16} (bf16 values are widened exactly to fp32, combined in fp32, and the result rounded to bf16
 * once, to nearest even); the data-movement collectives ({@code allGather}, {@code broadcast}, {@code send},
 * {@code recv}) accept every dtype and only move bytes. Chunked collectives split {@code count} as {@link Chunks}
 * says: chunk {@code r} is {@code [⌊r·count/N⌋, ⌊(r+1)·count/N⌋)}.
 * <ul>
 *   <li><b>In place:</b> {@code allReduce} and {@code broadcast} overwrite {@code buf}. {@code allGather} is in place
 *       when {@code send} is exactly the slice of {@code recv} that holds chunk {@code rank} (same address).</li>
 *   <li><b>Out of place:</b> {@code reduceScatter}'s {@code recv} must not overlap its {@code send};
 *       {@code allGather}'s {@code send} must either be that exact slice or not overlap {@code recv}. Inputs are only
 *       read; on failure the outputs' contents are unspecified.</li>
 * </ul>
 *
 * <h2>Asynchrony</h2>
 * Each collective has an {@code …Async} form returning a {@link Pending}; a communicator runs its collectives one at a
 * time in the order they were issued (blocking calls wait for the earlier asynchronous ones), so computation overlaps
 * communication but collectives never overlap each other. Buffers passed to an asynchronous call must be accessible
 * from other threads (from {@code Arena.ofShared()}, {@code ofAuto()} or {@code global()}). A communicator is used by
 * one thread at a time.
 *
 * <h2>Failures</h2>
 * Every call gives up after {@link #timeout()}. A rank that throws, closes its communicator or is killed while others
 * wait for it, or that does not arrive in time, makes every other rank's current and later collectives fail with a
 * {@link CollectiveException} naming the collective, the rank(s) at fault and the elapsed time. A communicator whose
 * collective failed is broken: its later calls fail at once.
 */
public interface Communicator extends AutoCloseable {

    /** Default timeout of every blocking call: five minutes. */
    Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);

    /** This rank, in {@code [0, size())}. */
    int rank();

    /** Number of ranks. */
    int size();

    /** How long any call waits for the other ranks before failing. */
    Duration timeout();

    /**
     * Whether the buffers are a device's memory rather than the host's: false (the default) for the host backends,
     * whose buffers are host memory they read and write; true for {@link NcclCommunicator}, whose buffers are device
     * views of its GPU, never read on the host. Code that keeps its data in a
     * {@link io.accel4j.core.memory.DeviceMemory} checks that this agrees with the memory's
     * {@link io.accel4j.core.memory.DeviceMemory#hostAccessible() hostAccessible()} (a host communicator needs host
     * memory, a device communicator device memory).
     */
    default boolean deviceBuffers() {
        return false;
    }

    /** {@code buf[i] ← op_r buf_r[i]} for {@code i < count}, in place, on every rank. */
    Pending allReduceAsync(MemorySegment buf, long count, DType dtype, ReduceOp op);

    /**
     * Rank {@code r} receives chunk {@code r} of the reduction: {@code recv[j] ← op_q send_q[Chunks.start(count,N,r) + j]}
     * for {@code j < Chunks.length(count, N, r)}. {@code count} is the length of {@code send} (the same on every
     * rank); {@code recv} holds at least chunk {@code r}'s length and must not overlap {@code send}.
     */
    Pending reduceScatterAsync(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op);

    /**
     * Every rank receives every rank's chunk: {@code recv[Chunks.start(count,N,q) + j] ← send_q[j]} for every rank
     * {@code q} and {@code j < Chunks.length(count, N, q)}. {@code count} is the length of {@code recv} (the same on
     * every rank); {@code send} holds this rank's chunk, or is exactly that slice of {@code recv} (in place).
     */
    Pending allGatherAsync(MemorySegment send, MemorySegment recv, long count, DType dtype);

    /** {@code buf ← buf_root} (the first {@code count} elements), in place, on every rank. */
    Pending broadcastAsync(MemorySegment buf, long count, DType dtype, int root);

    /** Completes on a rank only once every rank has called it. */
    Pending barrierAsync();

    /**
     * Sends the first {@code count} elements of {@code buf} to rank {@code peer}, which must call {@link #recv} with
     * this rank, the same count and dtype. Messages between two ranks arrive in the order sent; completes once the
     * data has left {@code buf} (the buffer may then be reused).
     */
    Pending sendAsync(MemorySegment buf, long count, DType dtype, int peer);

    /** Receives {@code count} elements from rank {@code peer} into {@code buf}; see {@link #send}. */
    Pending recvAsync(MemorySegment buf, long count, DType dtype, int peer);

    /**
     * A new communicator over the ranks that pass the same {@code color} (≥ 0), ranked by {@code key} and then by
     * their rank here (MPI's {@code MPI_Comm_split}); a collective of this communicator (every rank calls it, in the
     * same order as its other collectives). The new communicator has this one's timeout, names its group in its
     * failures, and is the caller's to close (before this one). Backends that cannot split throw
     * {@link UnsupportedOperationException} saying why.
     */
    default Communicator split(int color, int key) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot split into groups");
    }

    /** Leaves the group. Ranks waiting for this one fail; closing twice does nothing. */
    @Override
    void close();

    default void allReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        allReduceAsync(buf, count, dtype, op).await();
    }

    default void reduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        reduceScatterAsync(send, recv, count, dtype, op).await();
    }

    default void allGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        allGatherAsync(send, recv, count, dtype).await();
    }

    default void broadcast(MemorySegment buf, long count, DType dtype, int root) {
        broadcastAsync(buf, count, dtype, root).await();
    }

    default void barrier() {
        barrierAsync().await();
    }

    default void send(MemorySegment buf, long count, DType dtype, int peer) {
        sendAsync(buf, count, dtype, peer).await();
    }

    default void recv(MemorySegment buf, long count, DType dtype, int peer) {
        recvAsync(buf, count, dtype, peer).await();
    }
}
