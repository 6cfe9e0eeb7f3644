package io.accel4j.nn;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import java.lang.foreign.MemorySegment;

/**
 * The tensor-parallel group a network's blocks are split over ({@link NetworkSpec#tensorParallel}): this rank's
 * place in it and the one collective the blocks need, an fp32 sum of partial results over the group. One rank
 * ({@link #NONE}) when the network is not split; the tensor-parallel blocks then compute what the plain ones do.
 */
public final class TensorParallel {

    /** No split: one rank, no communication. */
    public static final TensorParallel NONE = new TensorParallel(null, 0, 1);

    private final Communicator comm;
    private final int rank;
    private final int size;

    private TensorParallel(Communicator comm, int rank, int size) {
        this.comm = comm;
        this.rank = rank;
        this.size = size;
    }

    /** Rank {@code rank} of {@code size} without a communicator: for planning shapes only (no collective runs). */
    static TensorParallel planning(int rank, int size) {
        return size == 1 ? NONE : new TensorParallel(null, rank, size);
    }

    /**
     * The group {@code comm}, whose collectives must take buffers of {@code memory} (host memory for a host
     * communicator, a GPU's for NCCL).
     */
    public static TensorParallel over(Communicator comm, DeviceMemory memory) {
        if (comm == null || comm.size() == 1) {
            return NONE;
        }
        if (comm.deviceBuffers() == memory.hostAccessible()) {
            throw new IllegalArgumentException("tensor parallelism runs its collectives on the network's buffers, but "
                    + comm.getClass().getSimpleName() + " takes " + (comm.deviceBuffers() ? "device" : "host")
                    + " buffers and the network is in " + memory.describe());
        }
        return new TensorParallel(comm, comm.rank(), comm.size());
    }

    /** This rank in the group. */
    public int rank() {
        return rank;
    }

    /** T, the ranks in the group. */
    public int size() {
        return size;
    }

    /** The group's communicator, or null for {@link #NONE}. */
    public Communicator communicator() {
        return comm;
    }

    /** {@code buf[i] ← Σ_ranks buf[i]} for {@code count} fp32, in place (nothing for one rank). */
    public void sum(MemorySegment buf, long count) {
        if (size > 1) {
            comm.allReduce(buf, count, DType.FP32, ReduceOp.SUM);
        }
    }

    /** {@code buf[i] ← max_ranks buf[i]}, in place. */
    public void max(MemorySegment buf, long count) {
        if (size > 1) {
            comm.allReduce(buf, count, DType.FP32, ReduceOp.MAX);
        }
    }

    /**
     * Throws unless {@code parts · T} divides {@code n}, naming the module, what is split and the numbers (the
     * usage error of a tensor-parallel layout that does not fit the model).
     */
    public int split(String module, String what, long n, int parts) {
        long t = (long) size() * parts;
        if (n % t != 0) {
            throw new ShapeException("module '" + module + "': --tp " + size() + " does not divide " + what + " = "
                    + n + (parts > 1 ? " (in " + parts + " parts)" : ""));
        }
        return Math.toIntExact(n / size());
    }
}
