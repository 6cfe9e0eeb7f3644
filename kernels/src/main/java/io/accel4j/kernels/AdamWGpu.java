package io.accel4j.kernels;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.OpChecks;
import io.accel4j.core.ops.OptimizerOps;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Objects;

/**
 * adamw.cu: AdamW over one range of the buffers ({@code adamw_f32}, {@code adamw_bf16}: grid-stride, a launch per
 * range), and the whole step in one launch (adamw.cu's {@code adamw_f32_multi}, {@code adamw_bf16_multi}): a table of
 * {@link AdamWRange} rows (start, offset, length, first block, weight decay; 32 bytes each, the CUDA struct
 * {@code AdamwRange}) in device memory, and a grid of ⌈length / {@link #CHUNK}⌉ blocks per row, each block updating
 * {@link #CHUNK} consecutive elements of its row with 16-byte loads and stores where the four buffers are aligned for
 * them. The results are bit-identical to one single-range launch per row, and to the CPU kernel.
 *
 * <p>The table is uploaded when the rows or the weight decay differ from the last call's (a trainer passes the same
 * list every step, so it is uploaded once); the upload is a synchronous copy, which waits for the queued kernels
 * that read the old table. Work is queued on the default stream.
 */
final class AdamWGpu implements AutoCloseable {

    /** Threads of a block (ADAMW_THREADS). */
    static final int THREADS = 256;
    /** Elements a block updates (ADAMW_CHUNK: 256 threads × 4 elements × 4 passes). */
    static final int CHUNK = THREADS * 16;
    /** Bytes of one table row (sizeof(AdamwRange)). */
    static final int ROW_BYTES = 32;

    private final GpuLaunch gpu;
    private final ScratchBuffer table;
    /** A device view of {@link #table} holding the rows last uploaded; null before the first upload. */
    private MemorySegment uploaded;
    private List<AdamWRange> uploadedRows;
    private float uploadedDecay;
    private int grid;

    /** The launcher of {@code context}'s kernels; the table is allocated on the first multi-range call. */
    AdamWGpu(GpuLaunch gpu, CudaContext context) {
        this.gpu = Objects.requireNonNull(gpu, "gpu");
        this.table = ScratchBuffer.of(context);
    }

    /** adamw_f32 over {@code [offset, offset + length)} of the buffers. */
    void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v, long offset, long length,
               AdamWConfig config, int step, float gradScale) {
        OptimizerOps.checkAdamW(params, grads, m, v, offset, length, config, step, gradScale);
        if (length > 0) {
            float[] c = adamwCoefficients(config, step);
            gpu.launchN(Kernels.ADAMW_F32, length, params, grads, m, v, length, config.lr(), config.beta1(),
                    config.beta2(), config.eps(), config.weightDecay(), c[0], c[1], gradScale);
        }
    }

    /** adamw_bf16 over one range: fp32 master weights, the bf16 copy rounded stochastically from {@code seed}. */
    void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                   MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                   long seed) {
        OptimizerOps.checkAdamWBf16(paramsBf16, master, grads, m, v, offset, length, config, step, gradScale);
        if (length > 0) {
            float[] c = adamwCoefficients(config, step);
            gpu.launchN(Kernels.ADAMW_BF16, length, paramsBf16, master, grads, m, v, offset, length, config.lr(),
                    config.beta1(), config.beta2(), config.eps(), config.weightDecay(), c[0], c[1], gradScale, seed);
        }
    }

    /** The bias corrections {@code 1/(1−β1ᵗ)}, {@code 1/(1−β2ᵗ)} in float64 rounded to fp32, as the CPU kernel. */
    static float[] adamwCoefficients(AdamWConfig k, int t) {
        return new float[] {(float) (1 / (1 - Math.pow(k.beta1(), t))), (float) (1 / (1 - Math.pow(k.beta2(), t)))};
    }

    /** adamw_f32_multi over {@code ranges} of the buffers (device views holding every range's elements). */
    void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v, List<AdamWRange> ranges,
               AdamWConfig config, int step, float gradScale) {
        if (prepare(params, "params", grads, m, v, ranges, config, step, gradScale)) {
            float[] c = adamwCoefficients(config, step);
            Kernels.ADAMW_F32_MULTI.launch(gpu.kernel(Kernels.ADAMW_F32_MULTI), Dim.of(grid), Dim.of(THREADS), 0,
                    null, params, grads, m, v, uploaded, ranges.size(), config.lr(), config.beta1(),
                    config.beta2(), config.eps(), c[0], c[1], gradScale);
        }
    }

    /** adamw_bf16_multi over {@code ranges}; {@code paramsBf16} indexed as {@code master}. */
    void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                   MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale,
                   long seed) {
        if (prepare(master, "master", grads, m, v, ranges, config, step, gradScale)) {
            OpChecks.elements("paramsBf16", paramsBf16, AdamWRange.check(ranges), 2, "16-bit values");
            float[] c = adamwCoefficients(config, step);
            Kernels.ADAMW_BF16_MULTI.launch(gpu.kernel(Kernels.ADAMW_BF16_MULTI), Dim.of(grid), Dim.of(THREADS), 0,
                    null, paramsBf16, master, grads, m, v, uploaded, ranges.size(), config.lr(),
                    config.beta1(), config.beta2(), config.eps(), c[0], c[1], gradScale, seed);
        }
    }

    /** Checks the arguments and uploads the table when it changed; false when there is nothing to update. */
    private boolean prepare(MemorySegment p, String pName, MemorySegment grads, MemorySegment m, MemorySegment v,
                            List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale) {
        long elements = OptimizerOps.checkAdamWRanges(pName, p, grads, m, v, ranges, config, step, gradScale);
        if (elements == 0) {
            return false;
        }
        if (!ranges.equals(uploadedRows) || Float.floatToRawIntBits(config.weightDecay())
                != Float.floatToRawIntBits(uploadedDecay)) {
            upload(List.copyOf(ranges), config.weightDecay());
        }
        return grid > 0;
    }

    private void upload(List<AdamWRange> rows, float weightDecay) {
        long bytes = (long) ROW_BYTES * Math.max(1, rows.size());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes, 8);
            long blocks = rows(host, rows, weightDecay);
            if (blocks > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("AdamW over " + rows.size() + " ranges needs " + blocks
                        + " blocks of " + CHUNK + " elements, more than a grid takes");
            }
            DeviceBuffer t = table.atLeast(bytes);
            t.copyFrom(host);
            uploaded = GpuOps.device(t);
            uploadedRows = rows;
            uploadedDecay = weightDecay;
            grid = (int) blocks;
        }
    }

    /**
     * Writes the table of {@code rows} into {@code host} (the CUDA struct's layout, native order) and returns the
     * grid: the blocks of every row.
     */
    static long rows(MemorySegment host, List<AdamWRange> rows, float weightDecay) {
        long block = 0;
        for (int i = 0; i < rows.size(); i++) {
            AdamWRange r = rows.get(i);
            long at = (long) ROW_BYTES * i;
            host.set(ValueLayout.JAVA_LONG, at, r.start());
            host.set(ValueLayout.JAVA_LONG, at + 8, r.offset());
            host.set(ValueLayout.JAVA_LONG, at + 16, r.length());
            host.set(ValueLayout.JAVA_INT, at + 24, (int) Math.min(block, Integer.MAX_VALUE));
            host.set(ValueLayout.JAVA_FLOAT, at + 28, r.decays() ? weightDecay : 0f);
            block += (r.length() + CHUNK - 1) / CHUNK;
        }
        return block;
    }

    @Override
    public void close() {
        table.close();
    }
}
