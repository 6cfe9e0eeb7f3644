package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The synchronous copies between host and device memory, for any host segment: a native one is passed to the
 * driver as it is; a heap one ({@code MemorySegment.ofArray}), which a downcall refuses ("Heap segment not
 * allowed"), goes through a native staging buffer of at most {@link #STAGING_BYTES}, chunk by chunk. The
 * asynchronous copies cannot stage (the buffer would be freed before the copy runs): {@link #requireNative} refuses
 * a heap segment with a message saying what to pass instead.
 */
public final class HostCopy {

    /** The largest staging buffer (and so the chunk) of a copy from or to a heap segment. */
    static final long STAGING_BYTES = 8L << 20;

    private HostCopy() {}

    /** {@code cuMemcpyHtoD_v2}: the first {@code bytes} of {@code host} to device address {@code dst}. */
    public static void toDevice(long dst, MemorySegment host, long bytes) {
        checkRange(host, bytes);
        if (host.isNative()) {
            check("cuMemcpyHtoD_v2", cuda_h.cuMemcpyHtoD_v2(dst, host, bytes));
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment staging = arena.allocate(Math.min(bytes, STAGING_BYTES), 16);
            for (long at = 0; at < bytes; at += staging.byteSize()) {
                long n = Math.min(staging.byteSize(), bytes - at);
                MemorySegment.copy(host, at, staging, 0, n);
                check("cuMemcpyHtoD_v2", cuda_h.cuMemcpyHtoD_v2(dst + at, staging, n));
            }
        }
    }

    /** {@code cuMemcpyDtoH_v2}: {@code bytes} from device address {@code src} into the start of {@code host}. */
    public static void toHost(MemorySegment host, long src, long bytes) {
        checkRange(host, bytes);
        if (host.isNative()) {
            check("cuMemcpyDtoH_v2", cuda_h.cuMemcpyDtoH_v2(host, src, bytes));
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment staging = arena.allocate(Math.min(bytes, STAGING_BYTES), 16);
            for (long at = 0; at < bytes; at += staging.byteSize()) {
                long n = Math.min(staging.byteSize(), bytes - at);
                check("cuMemcpyDtoH_v2", cuda_h.cuMemcpyDtoH_v2(staging, src + at, n));
                MemorySegment.copy(staging, 0, host, at, n);
            }
        }
    }

    /** Refuses a heap segment for the asynchronous copy {@code call}, saying what it needs instead. */
    public static void requireNative(String call, MemorySegment host) {
        Objects.requireNonNull(host, "host");
        if (!host.isNative()) {
            throw new IllegalArgumentException(call + ": host is a heap segment (" + host.byteSize() + " bytes); an"
                    + " asynchronous copy needs native memory that stays alive until the stream synchronises (a"
                    + " PinnedBuffer, or an Arena's segment); the synchronous copies take heap segments");
        }
    }

    private static void checkRange(MemorySegment host, long bytes) {
        Objects.requireNonNull(host, "host");
        if (bytes < 0 || bytes > host.byteSize()) {
            throw new IllegalArgumentException("bytes is " + bytes + ", host holds " + host.byteSize());
        }
    }
}
