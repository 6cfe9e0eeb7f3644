package io.accel4j.kernels;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.HostCopy;
import io.accel4j.cuda.PinnedBuffer;
import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.LongFunction;

/**
 * {@link DeviceMemory} on one CUDA device: allocations are {@link DeviceBuffer}s handed out as device views
 * ({@link GpuOps#device}: segments whose address is the device address, never dereferenced on the host), copies
 * and fills are the driver's synchronous {@code cuMemcpy*} / {@code cuMemsetD8} on the legacy default stream (a heap
 * host segment staged through native memory by {@link HostCopy}), so
 * they are ordered with {@link GpuOps}'s kernels, which run there too. Device addresses are 256-byte aligned.
 */
public final class CudaMemory implements DeviceMemory {

    private final CudaContext context;

    /** Device memory of {@code context} (which stays the caller's to close, after every arena). */
    public CudaMemory(CudaContext context) {
        this.context = Objects.requireNonNull(context, "context");
    }

    @Override
    public DeviceArena arena() {
        return new BufferArena("device arena", bytes -> {
            DeviceBuffer b = context.allocate(bytes);
            return zeroed(b::close, () -> b.fill((byte) 0), GpuOps.device(b));
        });
    }

    /** Page-locked host memory ({@link PinnedBuffer}, {@code cuMemHostAlloc}), zeroed, freed with the arena. */
    @Override
    public DeviceArena hostArena() {
        return new BufferArena("pinned host arena", bytes -> {
            PinnedBuffer b = context.allocatePinned(bytes);
            return zeroed(b::close, () -> b.segment().fill((byte) 0), b.segment());
        });
    }

    /** A zeroed buffer of an arena: what frees it, and its memory as a segment. */
    private record Allocation(Runnable free, MemorySegment segment) {}

    /** The buffer {@code free} frees once {@code zero} has cleared it; freed at once if that fails. */
    private static Allocation zeroed(Runnable free, Runnable zero, MemorySegment segment) {
        try {
            zero.run();
        } catch (RuntimeException | Error e) {
            free.run();
            throw e;
        }
        return new Allocation(free, segment);
    }

    /**
     * The buffers of one arena ({@code allocator}'s, given at least one byte: the driver refuses 0), freed together;
     * the first failure to free one is thrown after the others were freed.
     */
    private static final class BufferArena implements DeviceArena {

        private final String what;
        private final LongFunction<Allocation> allocator;
        private final List<Runnable> buffers = new ArrayList<>();
        private boolean closed;

        BufferArena(String what, LongFunction<Allocation> allocator) {
            this.what = what;
            this.allocator = allocator;
        }

        @Override
        public MemorySegment allocate(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
            }
            if (closed) {
                throw new IllegalStateException("this " + what + " is closed");
            }
            Allocation a = allocator.apply(Math.max(1, bytes)); // cuMemAlloc/cuMemHostAlloc refuse 0 bytes
            buffers.add(a.free());
            return a.segment().asSlice(0, bytes);
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            RuntimeException first = null;
            for (Runnable free : buffers) {
                try {
                    free.run();
                } catch (RuntimeException e) {
                    if (first == null) {
                        first = e;
                    } else {
                        first.addSuppressed(e);
                    }
                }
            }
            buffers.clear();
            if (first != null) {
                throw first;
            }
        }
    }

    @Override
    public void copyToDevice(MemorySegment host, MemorySegment device) {
        long n = host.byteSize();
        DeviceMemory.checkCopy("host", host, "device", device, n);
        if (n > 0) {
            context.makeCurrent();
            HostCopy.toDevice(device.address(), host, n);
        }
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment host) {
        long n = host.byteSize();
        DeviceMemory.checkCopy("device", device, "host", host, n);
        if (n > 0) {
            context.makeCurrent();
            HostCopy.toHost(host, device.address(), n);
        }
    }

    @Override
    public void copy(MemorySegment src, MemorySegment dst) {
        long n = src.byteSize();
        DeviceMemory.checkCopy("src", src, "dst", dst, n);
        if (n > 0) {
            context.makeCurrent();
            check("cuMemcpyDtoD_v2", cuda_h.cuMemcpyDtoD_v2(dst.address(), src.address(), n));
        }
    }

    @Override
    public void zero(MemorySegment device) {
        long n = Objects.requireNonNull(device, "device").byteSize();
        if (n > 0) {
            context.makeCurrent();
            check("cuMemsetD8_v2", cuda_h.cuMemsetD8_v2(device.address(), (byte) 0, n));
        }
    }

    @Override
    public boolean hostAccessible() {
        return false;
    }

    @Override
    public String describe() {
        return "CUDA device memory (" + context.name() + ")";
    }
}
