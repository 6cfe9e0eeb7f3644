package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Device memory from {@code cuMemAlloc_v2}, freed by {@link #close()}. Copies take host {@link MemorySegment}s: the
 * synchronous ones any ({@link HostCopy} stages a heap segment through native memory), the asynchronous ones only
 * native (ideally pinned) memory, and they refuse a heap segment.
 * Every copy and fill checks its range against both sizes first.
 */
public final class DeviceBuffer extends NativeResource {

    private final CudaContext context;
    private final long address;
    private final long byteSize;

    private DeviceBuffer(CudaContext context, long address, long byteSize) {
        this.context = context;
        this.address = address;
        this.byteSize = byteSize;
    }

    static DeviceBuffer allocate(CudaContext context, long bytes) {
        if (bytes < 1) {
            throw new IllegalArgumentException("bytes must be >= 1, got " + bytes);
        }
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.JAVA_LONG);
            check("cuMemAlloc_v2", cuda_h.cuMemAlloc_v2(p, bytes));
            return new DeviceBuffer(context, p.get(ValueLayout.JAVA_LONG, 0), bytes);
        }
    }

    /** The {@code CUdeviceptr} (what a kernel parameter holds). */
    public long address() {
        ensureOpen();
        return address;
    }

    public long byteSize() {
        return byteSize;
    }

    /** Copies all of {@code host} to the start of this buffer. */
    public void copyFrom(MemorySegment host) {
        fits("host", host.byteSize());
        context.makeCurrent();
        HostCopy.toDevice(address, host, host.byteSize());
    }

    /** Fills all of {@code host} from the start of this buffer. */
    public void copyTo(MemorySegment host) {
        fits("host", host.byteSize());
        context.makeCurrent();
        HostCopy.toHost(host, address, host.byteSize());
    }

    /** Copies the first {@code bytes} of {@code src} to the start of this buffer. */
    public void copyFrom(DeviceBuffer src, long bytes) {
        fits("bytes", bytes);
        src.fits("bytes", bytes);
        context.makeCurrent();
        check("cuMemcpyDtoD_v2", cuda_h.cuMemcpyDtoD_v2(address, src.address, bytes));
    }

    /** {@link #copyFrom(MemorySegment)} on {@code stream}; {@code host} must stay alive until the stream syncs. */
    public void copyFromAsync(MemorySegment host, Stream stream) {
        fits("host", host.byteSize());
        HostCopy.requireNative("cuMemcpyHtoDAsync_v2", host);
        context.makeCurrent();
        check("cuMemcpyHtoDAsync_v2",
                cuda_h.cuMemcpyHtoDAsync_v2(address, host, host.byteSize(), Stream.handle(stream)));
    }

    /** {@link #copyTo(MemorySegment)} on {@code stream}. */
    public void copyToAsync(MemorySegment host, Stream stream) {
        fits("host", host.byteSize());
        HostCopy.requireNative("cuMemcpyDtoHAsync_v2", host);
        context.makeCurrent();
        check("cuMemcpyDtoHAsync_v2",
                cuda_h.cuMemcpyDtoHAsync_v2(host, address, host.byteSize(), Stream.handle(stream)));
    }

    /** {@link #copyFrom(DeviceBuffer, long)} on {@code stream}. */
    public void copyFromAsync(DeviceBuffer src, long bytes, Stream stream) {
        fits("bytes", bytes);
        src.fits("bytes", bytes);
        context.makeCurrent();
        check("cuMemcpyDtoDAsync_v2",
                cuda_h.cuMemcpyDtoDAsync_v2(address, src.address, bytes, Stream.handle(stream)));
    }

    /** Sets every byte to {@code value}. */
    public void fill(byte value) {
        ensureOpen();
        context.makeCurrent();
        check("cuMemsetD8_v2", cuda_h.cuMemsetD8_v2(address, value, byteSize));
    }

    /** Sets every 32-bit word to {@code bits} (e.g. {@code Float.floatToRawIntBits(x)}); size must be a multiple of 4. */
    public void fillInts(int bits) {
        ensureOpen();
        if (byteSize % 4 != 0) {
            throw new IllegalStateException(describe() + " is not a whole number of 32-bit words");
        }
        context.makeCurrent();
        check("cuMemsetD32_v2", cuda_h.cuMemsetD32_v2(address, bits, byteSize / 4));
    }

    private void fits(String what, long bytes) {
        ensureOpen();
        if (bytes < 0 || bytes > byteSize) {
            throw new IllegalArgumentException(what + " is " + bytes + " bytes, " + describe() + " holds " + byteSize);
        }
    }

    @Override
    String describe() {
        return "DeviceBuffer(" + byteSize + " bytes)";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cuMemFree_v2", cuda_h.cuMemFree_v2(address));
    }
}
