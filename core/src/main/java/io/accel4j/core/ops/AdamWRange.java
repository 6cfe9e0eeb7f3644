package io.accel4j.core.ops;

import java.util.List;
import java.util.Objects;

/**
 * One row of a multi-range AdamW ({@link OptimizerOps#adamw(java.lang.foreign.MemorySegment,
 * java.lang.foreign.MemorySegment, java.lang.foreign.MemorySegment, java.lang.foreign.MemorySegment, List,
 * AdamWConfig, int, float)}): elements {@code [start, start + length)} of the buffers passed, whose first element is
 * element {@code offset} of the whole parameter vector (the stochastic-rounding stream, as the single-range call's
 * {@code offset}; it differs from {@code start} for a ZeRO shard), updated with the config's weight decay when
 * {@code decays}, else with none. The multi-range SGD and Lion calls ({@code OptimizerOps.sgd}, {@code lion}) take
 * the same rows: the name is AdamW's, which had them first.
 *
 * @param start  first element in the buffers, ≥ 0
 * @param offset the same element's index in the whole parameter vector, ≥ 0
 * @param length elements, ≥ 0
 * @param decays whether the config's weight decay applies
 */
public record AdamWRange(long start, long offset, long length, boolean decays) {

    public AdamWRange {
        if (start < 0 || offset < 0 || length < 0) {
            throw new IllegalArgumentException("start, offset and length must be >= 0, got start=" + start
                    + ", offset=" + offset + ", length=" + length);
        }
    }

    /** One past the last element in the buffers. */
    public long end() {
        return start + length;
    }

    /**
     * Checks that {@code ranges} are in increasing order of {@code start} and do not overlap (each element is updated
     * at most once, whatever order an implementation works in), and returns the elements the buffers must hold: the
     * last range's end (0 for none).
     *
     * @throws IllegalArgumentException naming the two ranges that overlap or are out of order
     */
    public static long check(List<AdamWRange> ranges) {
        Objects.requireNonNull(ranges, "ranges");
        long end = 0;
        for (int i = 0; i < ranges.size(); i++) {
            AdamWRange r = Objects.requireNonNull(ranges.get(i), "ranges[" + i + "]");
            if (i > 0 && r.start() < end) {
                throw new IllegalArgumentException("ranges[" + i + "] " + r + " starts before ranges[" + (i - 1)
                        + "] " + ranges.get(i - 1) + " ends: the ranges must be in order and must not overlap");
            }
            end = Math.max(end, r.end());
        }
        return end;
    }
}
