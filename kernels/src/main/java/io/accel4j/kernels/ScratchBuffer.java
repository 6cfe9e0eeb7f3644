package io.accel4j.kernels;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A device buffer that grows on demand to the largest size asked for so far: the scratch of a launcher (attention's
 * D, the rounded matmul operands, FP8 codes, the AdamW range table). Nothing is allocated until the first
 * {@link #atLeast}. A larger request replaces the buffer once the work already queued is done (it may still read
 * the old one): the context is synchronised, the old buffer freed, a new one allocated, its contents undefined — or
 * zero when the buffer was made {@link #zeroed}.
 */
final class ScratchBuffer implements AutoCloseable {

    /** Slices of a scratch buffer start at multiples of this (cuBLASLt's preferred alignment). */
    static final long SLICE_ALIGN = 256;

    private final CudaContext context;
    private final boolean zeroed;
    private DeviceBuffer buffer;

    private ScratchBuffer(CudaContext context, boolean zeroed) {
        this.context = Objects.requireNonNull(context, "context");
        this.zeroed = zeroed;
    }

    /** A buffer whose contents after each growth are undefined. */
    static ScratchBuffer of(CudaContext context) {
        return new ScratchBuffer(context, false);
    }

    /** A buffer filled with zero bytes whenever it grows (callers must not write into it). */
    static ScratchBuffer zeroed(CudaContext context) {
        return new ScratchBuffer(context, true);
    }

    /** The buffer, at least {@code bytes} long (grown as the class comment says). */
    DeviceBuffer atLeast(long bytes) {
        if (buffer == null || buffer.byteSize() < bytes) {
            if (buffer != null) {
                context.synchronize(); // the queued work may still read it
                buffer.close();
                buffer = null;
            }
            buffer = context.allocate(bytes);
            if (zeroed) {
                buffer.fill((byte) 0);
            }
        }
        return buffer;
    }

    /** {@link #atLeast} as a device view ({@link GpuOps#device}). */
    MemorySegment view(long bytes) {
        return GpuOps.device(atLeast(bytes));
    }

    /** Bytes of a slice of n elements of {@code bytesEach}, rounded up to {@value #SLICE_ALIGN}. */
    static long slice(long n, int bytesEach) {
        return (n * bytesEach + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    }

    /** Frees the buffer, if any; a later {@link #atLeast} allocates again. */
    @Override
    public void close() {
        if (buffer != null) {
            buffer.close();
            buffer = null;
        }
    }
}
