package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** A non-blocking CUDA stream ({@code cuStreamCreate}), destroyed by {@link #close()}. */
public final class Stream extends NativeResource {

    private final CudaContext context;
    private final MemorySegment stream;

    private Stream(CudaContext context, MemorySegment stream) {
        this.context = context;
        this.stream = stream;
    }

    static Stream create(CudaContext context) {
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
            check("cuStreamCreate", cuda_h.cuStreamCreate(p, cuda_h.CU_STREAM_NON_BLOCKING));
            return new Stream(context, p.get(ValueLayout.ADDRESS, 0));
        }
    }

    /** The {@code CUstream} of {@code s}, or NULL (the legacy default stream) for {@code null}. */
    static MemorySegment handle(Stream s) {
        if (s == null) {
            return MemorySegment.NULL;
        }
        s.ensureOpen();
        return s.stream;
    }

    /** Waits for everything queued on this stream. */
    public void synchronize() {
        ensureOpen();
        context.makeCurrent();
        check("cuStreamSynchronize", cuda_h.cuStreamSynchronize(stream));
    }

    @Override
    String describe() {
        return "Stream(" + stream.address() + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cuStreamDestroy_v2", cuda_h.cuStreamDestroy_v2(stream));
    }
}
