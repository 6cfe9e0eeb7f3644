package io.accel4j.kernels;

import static io.accel4j.kernels.GpuLaunch.BLOCK;
import static io.accel4j.kernels.GpuLaunch.blocks;

import io.accel4j.core.ops.ReductionOps;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * norm.cu: sum of squares, amax and the non-finite check over n floats, each a grid of fixed per-block partials
 * ({@link Partials}) combined on the host in block order, so results do not vary from run to run. Each waits for
 * its kernel (the partials are copied back).
 */
final class ReductionsGpu {

    private final GpuLaunch gpu;
    private final Partials partials;

    ReductionsGpu(GpuLaunch gpu, Partials partials) {
        this.gpu = gpu;
        this.partials = partials;
    }

    double sumOfSquares(MemorySegment x, long n) {
        ReductionOps.checkReduction(x, n);
        if (n == 0) {
            return 0;
        }
        int grid = blocks(n);
        gpu.launch(Kernels.SUM_OF_SQUARES, Dim.of(grid), Dim.of(BLOCK), partials.device(), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return sumOfPartials(partials.onHost(arena, ValueLayout.JAVA_DOUBLE, grid), grid);
        }
    }

    /** sum_of_squares's result from its {@code grid} float64 partials: their sum in block order. */
    static double sumOfPartials(MemorySegment partials, int grid) {
        double sum = 0;
        for (int b = 0; b < grid; b++) {
            sum += partials.getAtIndex(ValueLayout.JAVA_DOUBLE, b);
        }
        return sum;
    }

    boolean hasNonFinite(MemorySegment x, long n) {
        ReductionOps.checkReduction(x, n);
        if (n == 0) {
            return false;
        }
        int grid = blocks(n);
        gpu.launch(Kernels.HAS_NON_FINITE, Dim.of(grid), Dim.of(BLOCK), partials.device(), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return anyPartial(partials.onHost(arena, ValueLayout.JAVA_INT, grid), grid);
        }
    }

    /** has_non_finite's result from its {@code grid} int32 partials: whether any is nonzero. */
    static boolean anyPartial(MemorySegment partials, int grid) {
        for (int b = 0; b < grid; b++) {
            if (partials.getAtIndex(ValueLayout.JAVA_INT, b) != 0) {
                return true;
            }
        }
        return false;
    }

    float amax(MemorySegment x, long n) {
        ReductionOps.checkReduction(x, n);
        if (n == 0) {
            return 0f;
        }
        int grid = blocks(n);
        gpu.launch(Kernels.AMAX, Dim.of(grid), Dim.of(BLOCK), partials.device(), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return maxOfPartials(partials.onHost(arena, ValueLayout.JAVA_FLOAT, grid), grid);
        }
    }

    /** amax's result from its {@code grid} fp32 partials: their maximum, NaN if any is NaN. */
    static float maxOfPartials(MemorySegment partials, int grid) {
        float max = 0f;
        for (int b = 0; b < grid; b++) {
            float p = partials.getAtIndex(ValueLayout.JAVA_FLOAT, b);
            max = Float.isNaN(p) || Float.isNaN(max) ? Float.NaN : Math.max(max, p);
        }
        return max;
    }
}
