package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

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
}
