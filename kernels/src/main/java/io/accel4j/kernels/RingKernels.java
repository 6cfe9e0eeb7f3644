package io.accel4j.kernels;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.CudaModule;
import io.accel4j.cuda.Stream;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The element-wise reduction step of an explicit ring all-reduce ({@code ring.cu}), queued on a caller's stream:
 * {@link #combine} ({@code acc ← acc + in} or {@code max(acc, in)}, fp32) and {@link #divide} (AVG's one division).
 * Owns its PTX module; the segments are device views (their address is a device address, never read on the host).
 */
public final class RingKernels implements AutoCloseable {

    private static final int BLOCK = 256;
    private static final int MAX_BLOCKS = 1024;

    private final CudaModule module;
    private final CudaKernel combine;
    private final CudaKernel divide;

    /** Loads {@code ring.ptx} into {@code context} (which stays the caller's to close, after this). */
    public RingKernels(CudaContext context) {
        Objects.requireNonNull(context, "context");
        module = context.loadPtx(Kernels.ptx("ring"));
        try {
            combine = module.function(Kernels.RING_COMBINE_F32.entry());
            divide = module.function(Kernels.RING_DIVIDE_F32.entry());
        } catch (RuntimeException e) {
            module.close();
            throw e;
        }
    }

    /** {@code acc[i] ← acc[i] + in[i]} (or Java's {@code Math.max} when {@code max}), {@code i < n}; fp32, on {@code stream}. */
    public void combine(MemorySegment acc, MemorySegment in, long n, boolean max, Stream stream) {
        need("acc", acc, n);
        need("in", in, n);
        if (n > 0) {
            Kernels.RING_COMBINE_F32.launch(combine, grid(n), Dim.of(BLOCK), 0, stream, acc, in, n, max ? 1 : 0);
        }
    }

    /** {@code x[i] ← x[i] / divisor}, {@code i < n}; fp32, on {@code stream}. */
    public void divide(MemorySegment x, long n, float divisor, Stream stream) {
        need("x", x, n);
        if (n > 0) {
            Kernels.RING_DIVIDE_F32.launch(divide, grid(n), Dim.of(BLOCK), 0, stream, x, n, divisor);
        }
    }

    private static Dim grid(long n) {
        return Dim.of((int) Math.min(MAX_BLOCKS, (n + BLOCK - 1) / BLOCK));
    }

    private static void need(String name, MemorySegment s, long n) {
        Objects.requireNonNull(s, name);
        if (n < 0 || s.byteSize() < 4 * n) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes, needs " + n + " floats");
        }
    }

    @Override
    public void close() {
        module.close();
    }
}
