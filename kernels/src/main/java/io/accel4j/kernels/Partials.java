package io.accel4j.kernels;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.HostCopy;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The per-block partials of the reductions and the FP8 cast ({@value GpuLaunch#MAX_BLOCKS} slots of 8 bytes in
 * device memory), and their copy back to the host, which waits for the kernel that wrote them. Owns the buffer.
 */
final class Partials implements AutoCloseable {

    private final CudaContext context;
    private final DeviceBuffer buffer;

    Partials(CudaContext context) {
        this.context = context;
        this.buffer = context.allocate(8L * GpuLaunch.MAX_BLOCKS);
    }

    /** The device view a kernel writes its partials to. */
    MemorySegment device() {
        return GpuOps.device(buffer);
    }

    /** The first {@code grid} partials, elements of {@code layout}, copied into {@code arena} (synchronous). */
    MemorySegment onHost(Arena arena, ValueLayout layout, int grid) {
        MemorySegment host = arena.allocate(layout, grid);
        context.makeCurrent();
        HostCopy.toHost(host, buffer.address(), layout.byteSize() * grid);
        return host;
    }

    @Override
    public void close() {
        buffer.close();
    }
}
