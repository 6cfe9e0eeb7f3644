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
        return elapsedMillis(ElapsedTimeV2.AVAILABLE, start.event, event);
    }

    /** Whether the driver has {@code cuEventElapsedTime_v2} (12.8+), looked up once. */
    private static final class ElapsedTimeV2 {
        static final boolean AVAILABLE = hasElapsedTimeV2(CudaLibraries.driver());
    }

    /** Whether {@code driver} exports {@code cuEventElapsedTime_v2} (drivers from 12.8 on; older ones do not). */
    static boolean hasElapsedTimeV2(CudaLibraries.Search driver) {
        return driver.found() && driver.lookup().find("cuEventElapsedTime_v2").isPresent();
    }

    /**
     * {@code cuEventElapsedTime_v2} where the driver has it, else {@code cuEventElapsedTime}, which every driver
     * exports (the two differ only in how they report some invalid event pairs).
     */
    static float elapsedMillis(boolean v2, MemorySegment start, MemorySegment end) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ms = arena.allocate(ValueLayout.JAVA_FLOAT);
            if (v2) {
                check("cuEventElapsedTime_v2", cuda_h.cuEventElapsedTime_v2(ms, start, end));
            } else {
                check("cuEventElapsedTime", cuda_h.cuEventElapsedTime(ms, start, end));
            }
            return ms.get(ValueLayout.JAVA_FLOAT, 0);
        }
    }

    /** The native handle (for tests of the timing call). */
    MemorySegment handle() {
        ensureOpen();
        return event;
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
