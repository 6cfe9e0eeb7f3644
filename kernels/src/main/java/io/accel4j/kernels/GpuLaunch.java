package io.accel4j.kernels;

import io.accel4j.core.ops.OpChecks;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The bottom of the GPU launchers (what {@code Parallel} and the size checks are to the CPU kernels): the argument
 * checks every op repeats, the grid of a grid-stride launch, and the launch itself, on the default stream, of a
 * {@link KernelSignature}'s kernel from the {@link KernelModules} (loaded on first use). One per {@link GpuOps}.
 */
final class GpuLaunch {

    /** Threads of a block of the element-wise kernels and the reductions. */
    static final int BLOCK = 256;
    /** Most blocks of a grid-stride element-wise kernel, and the partials of a reduction. */
    static final int MAX_BLOCKS = 1024;
    /** Threads per block of the thread-per-column kernels (layernorm params, encoder dwte). */
    static final int COLUMN_BLOCK = 128;

    private final KernelModules modules;

    GpuLaunch(KernelModules modules) {
        this.modules = Objects.requireNonNull(modules, "modules");
    }

    /** The loaded kernel of {@code s}. */
    CudaKernel kernel(KernelSignature s) {
        return modules.kernel(s);
    }

    /** A launch without dynamic shared memory. */
    void launch(KernelSignature s, Dim grid, Dim block, Object... args) {
        launchShared(s, grid, block, 0, args);
    }

    /** A launch with {@code sharedBytes} of dynamic shared memory (opted in by {@link CudaKernel#launch}). */
    void launchShared(KernelSignature s, Dim grid, Dim block, int sharedBytes, Object... args) {
        s.launch(modules.kernel(s), grid, block, sharedBytes, null, args);
    }

    /** A 1-D grid-stride launch over n elements (n ≥ 1). */
    void launchN(KernelSignature s, long n, Object... args) {
        launch(s, Dim.of(blocks(n)), Dim.of(BLOCK), args);
    }

    /** The grid of a 1-D grid-stride launch over n elements, and of the reductions. */
    static int blocks(long n) {
        return (int) Math.min(MAX_BLOCKS, (n + BLOCK - 1) / BLOCK);
    }

    /** ⌈n / tile⌉. */
    static int tiles(int n, int tile) {
        return (n + tile - 1) / tile;
    }

    /** {@code s} holds at least {@code elements} × {@code bytesEach} bytes, else an exception naming it. */
    static void need(String name, MemorySegment s, long elements, long bytesEach) {
        Objects.requireNonNull(s, name);
        if (s.byteSize() < elements * bytesEach) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes, needs " + elements + " × "
                    + bytesEach + " = " + elements * bytesEach);
        }
    }

    /** {@link OpChecks#positive}, the contract's. */
    static void positive(String name, long v) {
        OpChecks.positive(name, v);
    }

    /** {@link OpChecks#nonNegative}, the contract's. */
    static void nonNegative(String name, long v) {
        OpChecks.nonNegative(name, v);
    }
}
