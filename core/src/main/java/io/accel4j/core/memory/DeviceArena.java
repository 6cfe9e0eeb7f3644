package io.accel4j.core.memory;

import java.lang.foreign.MemorySegment;

/**
 * A scope of device allocations ({@link DeviceMemory#arena()}): each segment it hands out is zero-filled, aligned
 * for any element type, and valid until {@link #close}, which frees them all (exactly once; later calls do nothing).
 * Not thread-safe to allocate from; the segments may be used from any thread.
 */
public interface DeviceArena extends AutoCloseable {

    /**
     * {@code bytes} (≥ 0) of zeroed device memory.
     *
     * @throws IllegalArgumentException when {@code bytes} is negative
     * @throws IllegalStateException    after {@link #close}
     */
    MemorySegment allocate(long bytes);

    /** Frees every allocation of this arena. */
    @Override
    void close();
}
