package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Page-locked host memory from {@code cuMemHostAlloc} (fast, asynchronous copies), freed by {@link #close()}. */
public final class PinnedBuffer extends NativeResource {

    private final CudaContext context;
    private final MemorySegment segment;

    private PinnedBuffer(CudaContext context, MemorySegment segment) {
        this.context = context;
        this.segment = segment;
    }

    @SuppressWarnings("restricted") // reinterpret: cuMemHostAlloc returned exactly this many bytes
    static PinnedBuffer allocate(CudaContext context, long bytes) {
        if (bytes < 1) {
            throw new IllegalArgumentException("bytes must be >= 1, got " + bytes);
        }
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pp = arena.allocate(ValueLayout.ADDRESS);
            check("cuMemHostAlloc", cuda_h.cuMemHostAlloc(pp, bytes, cuda_h.CU_MEMHOSTALLOC_PORTABLE));
            return new PinnedBuffer(context, pp.get(ValueLayout.ADDRESS, 0).reinterpret(bytes));
        }
    }

    /**
     * The memory. The segment stays readable after {@link #close()} as far as Java can tell (it is not tied to an
     * arena), so do not keep it beyond the buffer's life.
     */
    public MemorySegment segment() {
        ensureOpen();
        return segment;
    }

    public long byteSize() {
        return segment.byteSize();
    }

    @Override
    String describe() {
        return "PinnedBuffer(" + segment.byteSize() + " bytes)";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cuMemFreeHost", cuda_h.cuMemFreeHost(segment));
    }
}
