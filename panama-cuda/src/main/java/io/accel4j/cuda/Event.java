package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** A CUDA event ({@code cuEventCreate}) for ordering and timing, destroyed by {@link #close()}. */
public final class Event extends NativeResource {

    private final CudaContext context;
    private final MemorySegment event;
    private final boolean timing;

    private Event(CudaContext context, MemorySegment event, boolean timing) {
        this.context = context;
        this.event = event;
        this.timing = timing;
    }

    static Event create(CudaContext context, boolean timing) {
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
            int flags = timing ? cuda_h.CU_EVENT_DEFAULT : cuda_h.CU_EVENT_DISABLE_TIMING;
            check("cuEventCreate", cuda_h.cuEventCreate(p, flags));
            return new Event(context, p.get(ValueLayout.ADDRESS, 0), timing);
        }
    }

    /** Records this event on {@code stream} ({@code null}: the default stream). */
    public void record(Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("cuEventRecord", cuda_h.cuEventRecord(event, Stream.handle(stream)));
    }

    /**
     * Makes {@code stream} ({@code null}: the default stream) wait, on the device, until the work before this event's
     * last {@link #record} is done ({@code cuStreamWaitEvent}); the host does not wait. A later {@link #record} does
     * not change what this wait waits for.
     */
    public void waitOn(Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("cuStreamWaitEvent", cuda_h.cuStreamWaitEvent(Stream.handle(stream), event, 0));
    }

    /** Waits until the work before the last {@link #record} is done. */
    public void synchronize() {
        ensureOpen();
        context.makeCurrent();
        check("cuEventSynchronize", cuda_h.cuEventSynchronize(event));
    }

    /**
     * Whether the work before the last {@link #record} is done, without waiting ({@code cuEventQuery}: true on
     * {@code CUDA_SUCCESS}, false on {@code CUDA_ERROR_NOT_READY}; any other status, e.g. a failed kernel, throws).
     */
    public boolean query() {
        ensureOpen();
        context.makeCurrent();
        int status = cuda_h.cuEventQuery(event);
        if (status == cuda_h.CUDA_ERROR_NOT_READY) {
            return false;
        }
        check("cuEventQuery", status);
        return true;
    }

    /** Milliseconds from {@code start} to this event (both recorded, this one completed; both timing events). */
    public float elapsedMillisSince(Event start) {
        ensureOpen();
        start.ensureOpen();
        if (!timing || !start.timing) {
            throw new IllegalStateException("elapsed time needs two timing events: " + start + ", " + this);
        }
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ms = arena.allocate(ValueLayout.JAVA_FLOAT);
            check("cuEventElapsedTime_v2", cuda_h.cuEventElapsedTime_v2(ms, start.event, event));
            return ms.get(ValueLayout.JAVA_FLOAT, 0);
        }
    }

    @Override
    String describe() {
        return "Event(" + event.address() + (timing ? ", timing" : "") + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cuEventDestroy_v2", cuda_h.cuEventDestroy_v2(event));
    }
}
