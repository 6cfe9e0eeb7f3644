package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * A few host values (a loss, flags, a sum of squares, checksum pieces) combined over the ranks of a communicator
 * whose buffers live in the model's memory: the values are copied into a small scratch buffer of that memory
 * ({@link DeviceMemory#copyToDevice}), the collective runs there, and the result is copied back. On the CPU the
 * scratch is host memory and the copies are {@link MemorySegment#copy}; on a GPU with NCCL it is device memory, which
 * the host never touches. Blocking calls only; one thread at a time, every rank calling the same methods in order.
 */
public final class ValueExchange implements AutoCloseable {

    private final Communicator comm;
    private final DeviceMemory memory;
    private final DeviceArena deviceArena;
    private final Arena hostArena = Arena.ofShared();
    private final MemorySegment device;
    private final MemorySegment host;

    /** Room for {@code floats} fp32 values (at least one) on {@code comm}'s ranks, the scratch in {@code memory}. */
    public ValueExchange(Communicator comm, DeviceMemory memory, int floats) {
        this.comm = Objects.requireNonNull(comm, "comm");
        this.memory = Objects.requireNonNull(memory, "memory");
        if (floats < 1) {
            throw new IllegalArgumentException("floats must be >= 1, got " + floats);
        }
        long bytes = (long) floats * Float.BYTES;
        this.deviceArena = memory.arena();
        try {
            this.device = deviceArena.allocate(bytes);
            this.host = hostArena.allocate(bytes, 64);
        } catch (RuntimeException | Error e) {
            deviceArena.close();
            hostArena.close();
            throw e;
        }
    }

    /** {@code values[i] ← op_r values_r[i]} over the ranks, in place; returns {@code values}. */
    public float[] allReduce(ReduceOp op, float... values) {
        MemorySegment h = slice(values.length);
        MemorySegment.copy(values, 0, h, ValueLayout.JAVA_FLOAT, 0, values.length);
        MemorySegment d = device.asSlice(0, h.byteSize());
        memory.copyToDevice(h, d);
        comm.allReduce(d, values.length, DType.FP32, op);
        memory.copyToHost(d, h);
        MemorySegment.copy(h, ValueLayout.JAVA_FLOAT, 0, values, 0, values.length);
        return values;
    }

    /** Whether {@code local} holds on any rank (a MAX of 0/1 flags): every rank gets the same answer. */
    public boolean any(boolean local) {
        return allReduce(ReduceOp.MAX, local ? 1f : 0f)[0] != 0f;
    }

    /**
     * Every rank's {@code mine}, bit for bit, in rank order: an {@code allGather} of the 8 bytes of each (it moves
     * bytes; an fp32 reduction would round them).
     */
    public double[] allGather(double mine) {
        int n = comm.size();
        MemorySegment h = slice(2 * n);
        MemorySegment d = device.asSlice(0, h.byteSize());
        MemorySegment slot = device.asSlice((long) comm.rank() * Double.BYTES, Double.BYTES);
        MemorySegment one = h.asSlice(0, Double.BYTES);
        one.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, 0, mine);
        memory.copyToDevice(one, slot);
        comm.allGather(slot, d, 2L * n, DType.FP32); // chunk r of 2N floats is slot r: in place
        memory.copyToHost(d, h);
        double[] all = new double[n];
        for (int r = 0; r < n; r++) {
            all[r] = h.get(ValueLayout.JAVA_DOUBLE_UNALIGNED, (long) r * Double.BYTES);
        }
        return all;
    }

    /** The first {@code floats} floats of the host buffer, or an error when the exchange is smaller. */
    private MemorySegment slice(int floats) {
        long bytes = (long) floats * Float.BYTES;
        if (floats < 1 || bytes > host.byteSize()) {
            throw new IllegalArgumentException("this exchange holds " + host.byteSize() / Float.BYTES
                    + " floats, asked for " + floats);
        }
        return host.asSlice(0, bytes);
    }

    @Override
    public void close() {
        try {
            deviceArena.close();
        } finally {
            if (hostArena.scope().isAlive()) {
                hostArena.close();
            }
        }
    }
}
