package io.accel4j.core.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The memory a backend computes in, and the only way data crosses between it and the host. A backend's segments
 * ("device segments") come from {@link #arena()}; slices of them ({@link MemorySegment#asSlice}) are device
 * segments too. Host code never reads or writes a device segment directly: it copies in with {@link #copyToDevice},
 * out with {@link #copyToHost}, and moves or clears device data with {@link #copy} and {@link #zero}. Host segments
 * are ordinary readable memory (heap or native).
 *
 * <p>For the CPU ({@link HostMemory}) device segments are host memory and every copy is a {@link MemorySegment#copy};
 * for a GPU they are device views (a segment whose address is a device address, which the host must never
 * dereference). Code written against this interface runs unchanged on either.
 *
 * <p>Ordering: each call is ordered after the backend's work queued before it and before the work queued after it;
 * {@link #copyToHost} returns once the host segment holds the data, {@link #copyToDevice} once the host segment may
 * be reused.
 *
 * <p>Threads: the copies may be called from any thread, also while another thread queues work (an offloaded
 * optimizer's copier threads, {@code io.accel4j.optim.OffloadPipeline}); a copy is then ordered after the work queued
 * before it by any thread. {@code CudaMemory} makes its context current on the calling thread for each call.
 */
public interface DeviceMemory {

    /** A new scope of device allocations, freed together when it is closed. */
    DeviceArena arena();

    /**
     * A new scope of <em>host</em> allocations that this memory copies to and from fastest — page-locked on a GPU,
     * where it also allows asynchronous copies —, for host buffers that cross every step (an offloaded optimizer's
     * master weights and gradients). Its segments are ordinary host memory (readable, 64-byte aligned, zeroed), freed
     * together when it is closed. The default: native memory of a shared {@link Arena}.
     */
    default DeviceArena hostArena() {
        Arena arena = Arena.ofShared();
        return new DeviceArena() {
            @Override
            public MemorySegment allocate(long bytes) {
                if (bytes < 0) {
                    throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
                }
                return arena.allocate(bytes, 64);
            }

            @Override
            public void close() {
                if (arena.scope().isAlive()) {
                    arena.close();
                }
            }
        };
    }

    /**
     * Copies all of {@code host} to the start of {@code device}.
     *
     * @throws IllegalArgumentException when {@code device} holds fewer bytes than {@code host}
     */
    void copyToDevice(MemorySegment host, MemorySegment device);

    /**
     * Fills all of {@code host} from the start of {@code device}.
     *
     * @throws IllegalArgumentException when {@code device} holds fewer bytes than {@code host}
     */
    void copyToHost(MemorySegment device, MemorySegment host);

    /**
     * Copies all of device segment {@code src} to the start of device segment {@code dst} (they must not overlap).
     *
     * @throws IllegalArgumentException when {@code dst} holds fewer bytes than {@code src}
     */
    void copy(MemorySegment src, MemorySegment dst);

    /** Sets every byte of device segment {@code device} to zero. */
    void zero(MemorySegment device);

    /**
     * Whether device segments are ordinary host memory that host-only code (the CPU collectives) may also read and
     * write: true only for {@link HostMemory}.
     */
    boolean hostAccessible();

    /**
     * The contents of device segment {@code device} where host code may read them: {@code device} itself when
     * {@link #hostAccessible()}, else a copy of it ({@link #copyToHost}) in a 64-byte-aligned segment of
     * {@code staging}.
     */
    default MemorySegment readableOnHost(MemorySegment device, Arena staging) {
        if (hostAccessible()) {
            return device;
        }
        MemorySegment host = staging.allocate(device.byteSize(), 64);
        copyToHost(device, host);
        return host;
    }

    /**
     * Where host code may write what device segment {@code device} is to hold: {@code device} itself when
     * {@link #hostAccessible()}, else a 64-byte-aligned segment of {@code staging} of the same size (its contents
     * undefined), which {@link #writeBack} then copies to the device.
     */
    default MemorySegment writableOnHost(MemorySegment device, Arena staging) {
        return hostAccessible() ? device : staging.allocate(device.byteSize(), 64);
    }

    /**
     * Completes a {@link #writableOnHost} write: copies {@code host} to {@code device} unless it is {@code device}
     * itself (the same region of host memory, written in place).
     */
    default void writeBack(MemorySegment host, MemorySegment device) {
        if (!host.equals(device)) {
            copyToDevice(host, device);
        }
    }

    /** One line for logs, e.g. {@code host memory} or {@code CUDA device memory (NVIDIA H100)}. */
    String describe();

    /**
     * Checks a copy's sizes for implementations: {@code src} and {@code dst} must both hold the {@code bytes} copied
     * (an {@link IllegalArgumentException} naming the segment and both numbers otherwise).
     */
    static void checkCopy(String srcName, MemorySegment src, String dstName, MemorySegment dst, long bytes) {
        for (int i = 0; i < 2; i++) {
            MemorySegment s = i == 0 ? src : dst;
            if (s.byteSize() < bytes) {
                throw new IllegalArgumentException((i == 0 ? srcName : dstName) + " holds " + s.byteSize()
                        + " bytes, the copy from " + srcName + " to " + dstName + " is " + bytes);
            }
        }
    }
}
