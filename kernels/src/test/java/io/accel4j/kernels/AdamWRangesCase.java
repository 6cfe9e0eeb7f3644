package io.accel4j.kernels;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import java.util.List;

/**
 * The multi-range AdamW case that {@link AdamWEmuTest} (adamw.cu on the CPU) and {@link AdamWGpuTest} (on a GPU) both
 * run: rows that cover the kernel's paths — several blocks of one row ({@link AdamWGpu#CHUNK} = 4096 elements), a
 * row of 3, a row starting at an element that is not a multiple of 4 (no 16-byte loads: the element-wise path), an
 * empty row, a gap of untouched elements, a last row with a partial quad — with and without weight decay, and
 * offsets in the whole parameter vector that differ from the starts, as a ZeRO shard's do.
 */
final class AdamWRangesCase {

    /** Elements of each buffer. */
    static final long ELEMENTS = 13_003;
    static final List<AdamWRange> RANGES = List.of(
            new AdamWRange(0, 100_000, 9_000, true),
            new AdamWRange(9_000, 109_000, 3, false),
            new AdamWRange(9_003, 109_003, 2_345, true),
            new AdamWRange(11_348, 111_348, 0, false),
            new AdamWRange(11_400, 200_000, 1_603, false));
    static final AdamWConfig CONFIG = new AdamWConfig(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
    static final int STEP = 5;
    static final float GRAD_SCALE = 0.5f;
    static final long SEED = 0x5EED_0000_0003L;

    private AdamWRangesCase() {}
}
