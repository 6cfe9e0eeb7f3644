package io.accel4j.cli.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * The workers of an asynchronous run of processes as their trainers see them: this worker's index and their number
 * (the data loader's shard), and no collective at all: the workers reach the parameter servers through their
 * mailbox ({@link io.accel4j.train.parallel.ParameterServers#remote}), never each other. A collective called on it
 * is a programming error, said as such.
 */
final class AsyncWorkerGroup implements Communicator {

    private final int rank;
    private final int size;
    private final Duration timeout;

    AsyncWorkerGroup(int rank, int size, Duration timeout) {
        this.rank = rank;
        this.size = size;
        this.timeout = timeout;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    private static UnsupportedOperationException none(String what) {
        return new UnsupportedOperationException(what + ": asynchronous workers run no collective (they push to "
                + "and pull from the parameter servers)");
    }

    @Override
    public Pending allReduceAsync(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        throw none("allReduce");
    }

    @Override
    public Pending reduceScatterAsync(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        throw none("reduceScatter");
    }

    @Override
    public Pending allGatherAsync(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        throw none("allGather");
    }

    @Override
    public Pending broadcastAsync(MemorySegment buf, long count, DType dtype, int root) {
        throw none("broadcast");
    }

    @Override
    public Pending barrierAsync() {
        throw none("barrier");
    }

    @Override
    public Pending sendAsync(MemorySegment buf, long count, DType dtype, int peer) {
        throw none("send");
    }

    @Override
    public Pending recvAsync(MemorySegment buf, long count, DType dtype, int peer) {
        throw none("recv");
    }

    @Override
    public void close() {
    }
}
