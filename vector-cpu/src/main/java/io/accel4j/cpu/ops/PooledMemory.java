package io.accel4j.cpu.ops;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The CPU backend's {@link DeviceMemory}: {@link HostMemory}'s, except that {@link #zero} of a mid-sized segment is
 * split over the pool in fixed chunks of {@link #CHUNK_BYTES}. The training step zeroes an activation gradient and
 * then has a GEMM or a row-wise kernel add into it on every thread; zeroed by the caller alone, half of those lines
 * sat dirty in the caller's cache and had to cross to the other core first (a backward chain at the bench model's
 * sizes: the 2-thread matmuls 10 % slower when the two vCPUs sat in two CCXs). With {@link Parallel}'s ranges each
 * thread zeroes the leading or trailing share that it then writes. Segments below two chunks, above
 * {@link #PARALLEL_MAX_BYTES} (the whole gradient buffer: one core fills memory faster than two here), or confined to
 * one thread are zeroed on the calling thread. Zeros either way.
 */
final class PooledMemory implements DeviceMemory {

    /** Bytes a task zeroes: {@link Tasks#CHUNK} floats (64 KiB, 64 rows of the bench model's C = 256). */
    static final long CHUNK_BYTES = (long) Tasks.CHUNK * Float.BYTES;
    /** Larger segments are zeroed on the calling thread. */
    static final long PARALLEL_MAX_BYTES = 16L << 20;

    private static final Thread ANY_OTHER_THREAD = new Thread(() -> {});

    private final Parallel pool;
    private final DeviceMemory host = HostMemory.INSTANCE;

    PooledMemory(Parallel pool) {
        this.pool = Objects.requireNonNull(pool, "pool");
    }

    @Override
    public DeviceArena arena() {
        return host.arena();
    }

    @Override
    public void copyToDevice(MemorySegment hostSegment, MemorySegment device) {
        host.copyToDevice(hostSegment, device);
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment hostSegment) {
        host.copyToHost(device, hostSegment);
    }

    @Override
    public void copy(MemorySegment src, MemorySegment dst) {
        host.copy(src, dst);
    }

    @Override
    public void zero(MemorySegment device) {
        Objects.requireNonNull(device, "device");
        long bytes = device.byteSize();
        if (pool.threads() == 1 || bytes < 2 * CHUNK_BYTES || bytes > PARALLEL_MAX_BYTES
                || !device.isAccessibleBy(ANY_OTHER_THREAD)) {
            host.zero(device);
            return;
        }
        int tasks = Math.toIntExact((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
        pool.forEach(tasks, t -> {
            long from = t * CHUNK_BYTES;
            device.asSlice(from, Math.min(CHUNK_BYTES, bytes - from)).fill((byte) 0);
        });
    }

    @Override
    public boolean hostAccessible() {
        return host.hostAccessible();
    }

    @Override
    public String describe() {
        return host.describe();
    }
}
