package io.accel4j.collectives;

import io.accel4j.core.DType;
import io.accel4j.cpu.Check;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The argument checks of {@link Communicator}'s calls for rank {@code rank} of {@code size}, shared by every backend
 * ({@link AbstractCommunicator}'s host backends, {@link NcclCommunicator}): sizes against the segments, ranks in
 * range, outputs not overlapping inputs. Messages name the argument and the numbers.
 */
final class CollectiveArgs {

    private CollectiveArgs() {}

    static void reduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        reducible(dtype, op);
        Check.nonNegative("count", count);
        Check.elements("buf", buf, count, dtype.byteSize(), dtype + " values");
    }

    static void reduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op, int rank,
                              int size) {
        reducible(dtype, op);
        Check.nonNegative("count", count);
        int b = dtype.byteSize();
        long mine = Chunks.length(count, size, rank);
        Check.elements("send", send, count, b, dtype + " values");
        Check.elements("recv", recv, mine, b, dtype + " values (chunk " + rank + " of " + count + ")");
        Check.disjoint("recv", recv, mine * b, "send", send, count * b);
    }

    static void allGather(MemorySegment send, MemorySegment recv, long count, DType dtype, int rank, int size) {
        Objects.requireNonNull(dtype, "dtype");
        Check.nonNegative("count", count);
        int b = dtype.byteSize();
        long mine = Chunks.length(count, size, rank);
        Check.elements("send", send, mine, b, dtype + " values (chunk " + rank + " of " + count + ")");
        Check.elements("recv", recv, count, b, dtype + " values");
        if (!inPlaceGather(send, recv, count, dtype, rank, size)) {
            Check.disjoint("recv", recv, count * b, "send", send, mine * b);
        }
    }

    /** {@code send} is exactly chunk {@code rank} of {@code recv}. */
    static boolean inPlaceGather(MemorySegment send, MemorySegment recv, long count, DType dtype, int rank, int size) {
        return send.address() == recv.address() + Chunks.start(count, size, rank) * dtype.byteSize()
                && (send.isNative() == recv.isNative())
                && (send.heapBase().isEmpty() || send.heapBase().equals(recv.heapBase()));
    }

    static void broadcast(MemorySegment buf, long count, DType dtype, int root, int size) {
        Objects.requireNonNull(dtype, "dtype");
        Check.nonNegative("count", count);
        rank("root", root, size);
        Check.elements("buf", buf, count, dtype.byteSize(), dtype + " values");
    }

    static void peer(MemorySegment buf, long count, DType dtype, int peer, int rank, int size) {
        Objects.requireNonNull(dtype, "dtype");
        Check.nonNegative("count", count);
        rank("peer", peer, size);
        if (peer == rank) {
            throw new IllegalArgumentException("peer must differ from this rank (" + rank + ")");
        }
        Check.elements("buf", buf, count, dtype.byteSize(), dtype + " values");
    }

    static void rank(String name, int r, int size) {
        if (r < 0 || r >= size) {
            throw new IllegalArgumentException(name + " must be in [0, " + size + "), got " + r);
        }
    }

    static void reducible(DType dtype, ReduceOp op) {
        Objects.requireNonNull(op, "op");
        if (dtype != DType.FP32 && dtype != DType.BF16) {
            throw new IllegalArgumentException("reductions take FP32 or BF16 buffers, got " + dtype);
        }
    }
}
