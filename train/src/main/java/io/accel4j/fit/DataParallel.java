package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.train.parallel.ValueExchange;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * DDP: every rank holds the whole model and optimizer, trains on its own slice of each global batch, and the gradients
 * are averaged with one all-reduce after backward; since every rank then applies the same update to the same
 * parameters, the replicas stay bit-identical. The collectives run on the network's own buffers, so the communicator
 * must take buffers of its memory (host memory for the CPU, NCCL for a GPU).
 */
public class DataParallel implements GradientSync {

    final Communicator comm;
    final ValueExchange values;

    /**
     * DDP over {@code comm}, whose collectives run on buffers of {@code memory}.
     *
     * @throws IllegalArgumentException when the communicator cannot take that memory's buffers
     */
    public DataParallel(Communicator comm, DeviceMemory memory) {
        this(comm, memory, 0);
    }

    /** {@link #DataParallel(Communicator, DeviceMemory)} with room for {@code values} floats in {@link #max}. */
    public DataParallel(Communicator comm, DeviceMemory memory, int values) {
        this.comm = Objects.requireNonNull(comm, "comm");
        if (comm.deviceBuffers() == memory.hostAccessible()) {
            throw new IllegalArgumentException("data parallelism runs its collectives on the network's buffers, but "
                    + comm.getClass().getSimpleName() + " takes " + (comm.deviceBuffers() ? "device" : "host")
                    + " buffers and the network is in " + memory.describe());
        }
        this.values = new ValueExchange(comm, memory, Math.max(values, 2 * comm.size())); // allGather: 2 a rank
    }

    @Override
    public int rank() {
        return comm.rank();
    }

    @Override
    public int ranks() {
        return comm.size();
    }

    @Override
    public void reduce(MemorySegment grads, long count) {
        comm.allReduce(grads, count, DType.FP32, ReduceOp.AVG);
    }

    @Override
    public double mean(double value) {
        return values.allReduce(ReduceOp.AVG, (float) value)[0];
    }

    @Override
    public boolean any(boolean local) {
        return values.any(local);
    }

    @Override
    public float[] max(float[] v) {
        return values.allReduce(ReduceOp.MAX, v);
    }

    @Override
    public void close() {
        values.close();
    }
}
