package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Fused AdamW over a range of the parameter vector. Every segment passed holds the range's {@code length} elements
 * from its start (slice full buffers, or pass a ZeRO shard's own buffers); {@code offset} is the index of the range's
 * first element in the whole parameter vector, which names the stochastic-rounding stream, so a result does not
 * depend on how the vector is sharded.
 *
 * <p>For each i, with {@code g = gradScale·grads[i]} and step {@code t ≥ 1}: {@code m = β1·m + (1−β1)·g},
 * {@code v = β2·v + (1−β2)·g²}, {@code m̂ = m/(1−β1ᵗ)}, {@code v̂ = v/(1−β2ᵗ)},
 * {@code p −= lr·(m̂/(√v̂ + eps) + weightDecay·p)}. {@code gradScale} folds in clipping and loss-scale unscaling.
 */
public interface OptimizerOps {

    /** AdamW on fp32 parameters: updates {@code params}, {@code m}, {@code v} (fp32, length elements each). */
    void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
               long offset, long length, AdamWConfig config, int step, float gradScale);

    /**
     * AdamW on fp32 master weights with a bf16 copy: {@code master}, {@code m}, {@code v} are updated as in
     * {@link #adamw}, then {@code paramsBf16[i] = bf16 stochastic rounding of master[i]} with the random bits
     * {@code CounterRng.bits(seed, offset + i)} (see {@code io.accel4j.core.Bf16#fromFloatStochastic}). Use a fresh
     * seed per step.
     */
    void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                   MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                   long seed);

    /**
     * {@link #adamw(MemorySegment, MemorySegment, MemorySegment, MemorySegment, long, long, AdamWConfig, int, float)}
     * over every range of {@code ranges} ({@link AdamWRange#check}: in order, disjoint) of the buffers, each with
     * {@code config}'s weight decay or none: a whole optimizer step in one call (one launch on a GPU). The results
     * are those of one call per range. This default makes those calls.
     */
    default void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                       List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale) {
        AdamWRange.check(ranges);
        for (AdamWRange r : ranges) {
            long at = r.start() * Float.BYTES, bytes = r.length() * Float.BYTES;
            adamw(params.asSlice(at, bytes), grads.asSlice(at, bytes), m.asSlice(at, bytes), v.asSlice(at, bytes),
                    r.offset(), r.length(), r.decays() ? config : config.withWeightDecay(0), step, gradScale);
        }
    }

    /**
     * {@link #adamwBf16(MemorySegment, MemorySegment, MemorySegment, MemorySegment, MemorySegment, long, long,
     * AdamWConfig, int, float, long)} over every range of {@code ranges}, as the fp32 multi-range call;
     * {@code paramsBf16} is indexed as {@code master}. This default makes one call per range.
     */
    default void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                           MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale,
                           long seed) {
        AdamWRange.check(ranges);
        for (AdamWRange r : ranges) {
            long at = r.start() * Float.BYTES, bytes = r.length() * Float.BYTES;
            adamwBf16(paramsBf16.asSlice(r.start() * 2, r.length() * 2), master.asSlice(at, bytes),
                    grads.asSlice(at, bytes), m.asSlice(at, bytes), v.asSlice(at, bytes), r.offset(), r.length(),
                    r.decays() ? config : config.withWeightDecay(0), step, gradScale, seed);
        }
    }
}
