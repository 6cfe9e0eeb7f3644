package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Fused optimizer updates (AdamW, SGD with momentum, Lion) over a range of the parameter vector. Every segment passed
 * holds the range's {@code length} elements from its start (slice full buffers, or pass a ZeRO shard's own buffers);
 * {@code offset} is the index of the range's first element in the whole parameter vector, which names the
 * stochastic-rounding stream, so a result does not depend on how the vector is sharded (the fp32 SGD and Lion updates
 * use no random bits: for them it only keeps the signatures alike). Every update is element-wise: element i's result
 * depends on element i of each buffer only. The multi-range forms take {@link AdamWRange} rows, whatever the
 * optimizer.
 *
 * <p>AdamW: for each i, with {@code g = gradScale·grads[i]} and step {@code t ≥ 1}: {@code m = β1·m + (1−β1)·g},
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

    /**
     * SGD with momentum on fp32 parameters, PyTorch's {@code torch.optim.SGD}: updates {@code params} and the momentum
     * buffer {@code buf} (fp32, {@code length} elements each) from {@code grads}. For each i, with μ, τ, λ the
     * config's momentum, dampening and weight decay:
     * <pre>
     *   g = gradScale·grads[i] + λ·params[i]
     *   buf[i] = g                         on the first step (step == 1): the old buf[i] is not read
     *   buf[i] = μ·buf[i] + (1 − τ)·g      on every later step (step ≥ 2)
     *   d = nesterov ? g + μ·buf[i] : buf[i]
     *   params[i] −= lr·d
     * </pre>
     * The first-step rule is the {@code step} argument's: step 1 initialises the buffer to the gradient, as PyTorch
     * does on the first step (so τ does not damp it), and the caller need not zero it. With μ = 0 this is plain SGD,
     * {@code d = g}, and {@code buf} is neither read nor written (any segment, {@link MemorySegment#NULL} too).
     *
     * <p>This default has no kernel: it throws {@link UnsupportedOperationException} naming the backend's class.
     *
     * @param offset    index of the range's first element in the whole vector, ≥ 0 (not used by the update)
     * @param step      t ≥ 1, the number of this update (only whether it is the first matters)
     * @param gradScale finite; multiplies the gradients (clipping, loss-scale unscaling), not the weight decay
     */
    default void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                     SgdConfig config, int step, float gradScale) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " has no SGD kernel");
    }

    /**
     * {@link #sgd(MemorySegment, MemorySegment, MemorySegment, long, long, SgdConfig, int, float)} over every range of
     * {@code ranges} ({@link AdamWRange#check}: in order, disjoint) of the buffers, each with {@code config}'s weight
     * decay when the row {@link AdamWRange#decays() decays}, else with none: a whole optimizer step in one call. The
     * results are those of one call per range. This default makes those calls.
     */
    default void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, List<AdamWRange> ranges,
                     SgdConfig config, int step, float gradScale) {
        AdamWRange.check(ranges);
        for (AdamWRange r : ranges) {
            long at = r.start() * Float.BYTES, bytes = r.length() * Float.BYTES;
            MemorySegment b = config.momentum() == 0 ? buf : buf.asSlice(at, bytes);
            sgd(params.asSlice(at, bytes), grads.asSlice(at, bytes), b, r.offset(), r.length(),
                    r.decays() ? config : config.withWeightDecay(0), step, gradScale);
        }
    }

    /**
     * Lion on fp32 parameters (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Program 1): updates
     * {@code params} and the momentum {@code m} (fp32, {@code length} elements each) from {@code grads}. For each i:
     * <pre>
     *   g = gradScale·grads[i]
     *   c = β1·m[i] + (1 − β1)·g
     *   params[i] = params[i]·(1 − lr·λ) − lr·sign(c)      sign(±0) = 0, sign(NaN) = NaN
     *   m[i] = β2·m[i] + (1 − β2)·g
     * </pre>
     * The weight decay is decoupled; {@code 1 − lr·λ} is {@link LionConfig#decayFactor()}. Lion needs no step count
     * (it has no bias correction), and {@code m} starts at zero.
     *
     * <p>This default has no kernel: it throws {@link UnsupportedOperationException} naming the backend's class.
     *
     * @param offset    index of the range's first element in the whole vector, ≥ 0 (not used by the update)
     * @param gradScale finite; multiplies the gradients (clipping, loss-scale unscaling)
     */
    default void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                      LionConfig config, float gradScale) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " has no Lion kernel");
    }

    /**
     * {@link #lion(MemorySegment, MemorySegment, MemorySegment, long, long, LionConfig, float)} over every range of
     * {@code ranges} ({@link AdamWRange#check}: in order, disjoint), each with {@code config}'s weight decay when the
     * row {@link AdamWRange#decays() decays}, else with none. The results are those of one call per range. This
     * default makes those calls.
     */
    default void lion(MemorySegment params, MemorySegment grads, MemorySegment m, List<AdamWRange> ranges,
                      LionConfig config, float gradScale) {
        AdamWRange.check(ranges);
        for (AdamWRange r : ranges) {
            long at = r.start() * Float.BYTES, bytes = r.length() * Float.BYTES;
            lion(params.asSlice(at, bytes), grads.asSlice(at, bytes), m.asSlice(at, bytes), r.offset(), r.length(),
                    r.decays() ? config : config.withWeightDecay(0), gradScale);
        }
    }

    /**
     * {@link #adamw}'s argument checks, shared by every backend: offset, length ≥ 0 without overflow, step ≥ 1, a
     * finite gradScale; params, grads, m and v hold length floats. Thread-sharing and aliasing stay the CPU's own.
     */
    static void checkAdamW(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v, long offset,
                           long length, AdamWConfig config, int step, float gradScale) {
        checkAdamWState("params", params, grads, m, v, offset, length, config, step, gradScale);
    }

    /**
     * {@link #adamwBf16}'s argument checks: {@link #checkAdamW}'s with {@code master} for params, and paramsBf16
     * holding length 16-bit values.
     */
    static void checkAdamWBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                               MemorySegment v, long offset, long length, AdamWConfig config, int step,
                               float gradScale) {
        checkAdamWState("master", master, grads, m, v, offset, length, config, step, gradScale);
        OpChecks.elements("paramsBf16", paramsBf16, length, Short.BYTES, "16-bit values");
    }

    /**
     * The multi-range AdamW's checks, shared by every backend: {@link AdamWRange#check} on the ranges, step ≥ 1, a
     * finite gradScale; params (or master), grads, m and v hold every range's elements. Returns that count.
     */
    static long checkAdamWRanges(String paramsName, MemorySegment params, MemorySegment grads, MemorySegment m,
                                 MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step,
                                 float gradScale) {
        java.util.Objects.requireNonNull(config, "config");
        long elements = AdamWRange.check(ranges);
        OpChecks.positive("step", step);
        checkRange(0, 0, gradScale);
        OpChecks.floats(paramsName, params, elements);
        OpChecks.floats("grads", grads, elements);
        OpChecks.floats("m", m, elements);
        OpChecks.floats("v", v, elements);
        return elements;
    }

    private static void checkAdamWState(String paramsName, MemorySegment params, MemorySegment grads,
                                        MemorySegment m, MemorySegment v, long offset, long length,
                                        AdamWConfig config, int step, float gradScale) {
        java.util.Objects.requireNonNull(config, "config");
        checkRange(offset, length, gradScale);
        OpChecks.positive("step", step);
        OpChecks.floats(paramsName, params, length);
        OpChecks.floats("grads", grads, length);
        OpChecks.floats("m", m, length);
        OpChecks.floats("v", v, length);
    }

    /**
     * {@link #sgd}'s argument checks, shared by every backend: offset, length ≥ 0 without overflow, step ≥ 1, a finite
     * gradScale; params and grads hold length floats, and buf too when there is momentum.
     */
    static void checkSgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                         SgdConfig config, int step, float gradScale) {
        java.util.Objects.requireNonNull(config, "config");
        checkRange(offset, length, gradScale);
        OpChecks.positive("step", step);
        OpChecks.floats("params", params, length);
        OpChecks.floats("grads", grads, length);
        if (config.momentum() != 0) {
            OpChecks.floats("buf", buf, length);
        }
    }

    /**
     * {@link #lion}'s argument checks, shared by every backend: offset, length ≥ 0 without overflow, a finite
     * gradScale; params, grads and m hold length floats.
     */
    static void checkLion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                          LionConfig config, float gradScale) {
        java.util.Objects.requireNonNull(config, "config");
        checkRange(offset, length, gradScale);
        OpChecks.floats("params", params, length);
        OpChecks.floats("grads", grads, length);
        OpChecks.floats("m", m, length);
    }

    private static void checkRange(long offset, long length, float gradScale) {
        OpChecks.nonNegative("offset", offset);
        OpChecks.nonNegative("length", length);
        if (offset > Long.MAX_VALUE - length) {
            throw new IllegalArgumentException("offset + length overflows: " + offset + " + " + length);
        }
        if (!Float.isFinite(gradScale)) {
            throw new IllegalArgumentException("gradScale must be finite, got " + gradScale);
        }
    }
}
