package io.accel4j.cpu.ops;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.OptimizerOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.LSHR;

/**
 * Fused AdamW over a range of the parameter vector, one pass over memory (llm.c's {@code adamw_kernel3}).
 *
 * <p>Shapes: every segment holds the range's {@code length} elements from its start; {@code offset} is the index of
 * the range's first element in the whole parameter vector (it only names the stochastic-rounding stream). For each
 * element, in fp32, with the bias corrections {@code c1 = 1/(1−β1ᵗ)}, {@code c2 = 1/(1−β2ᵗ)} computed once in float64
 * and rounded to fp32:
 * <pre>
 *   g = gradScale·grads[i]
 *   m[i] = β1·m[i] + (1−β1)·g
 *   v[i] = β2·v[i] + (1−β2)·(g·g)
 *   p[i] = p[i] − lr·((m[i]·c1) / (√(v[i]·c2) + eps) + weightDecay·p[i])
 * </pre>
 * Every operation is an IEEE fp32 operation (no fused multiply-add), done identically by the vector lanes and the
 * scalar tail, so an element's result does not depend on where the range is split: updating {@code [0,n)} at once
 * or as {@code [0,k)}, {@code [k,n)} with matching offsets gives the same bits. The range is cut into fixed chunks of
 * {@value #CHUNK} elements spread over the pool. The bf16 variant then writes
 * {@code paramsBf16[i] = Bf16.fromFloatStochastic(p[i], CounterRng.bits(seed, offset + i))}, bit for bit: the random
 * bits come a block at a time from {@link RandomBits} (8 lanes of 64 bits with 512-bit vectors; scalar code with
 * narrower ones, since SplitMix64 needs 64-bit multiplies AVX2 lacks).
 *
 * <p>Per element the fp32 update reads 16 bytes and writes 12, and computes one square root and one division, both
 * vector instructions; it is memory-bound on any machine where a vector sqrt plus divide take less than the time to
 * move 28·lanes bytes.
 */
public final class AdamW {

    private AdamW() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final VectorSpecies<Integer> I = F.withLanes(int.class);
    /** lanes shorts: half the float vector's bits. */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(Math.max(64, F.vectorBitSize() / 2)));
    private static final int L = F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    /** Elements per task. */
    static final int CHUNK = 1 << 16;
    /** Elements whose random bits are made at a time (a multiple of every lane count). */
    private static final int RANDOM_BLOCK = 1024;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;

    /**
     * AdamW on fp32 parameters: updates {@code params}, {@code m}, {@code v} (fp32, {@code length} elements each)
     * from {@code grads}.
     *
     * @param offset    index of the range's first element in the whole vector, ≥ 0 (unused by the fp32 update)
     * @param step      t ≥ 1, the number of this update
     * @param gradScale finite; multiplies the gradients (clipping, loss-scale unscaling)
     */
    public static void update(Parallel pool, MemorySegment params, MemorySegment grads, MemorySegment m,
                              MemorySegment v, long offset, long length, AdamWConfig config, int step,
                              float gradScale) {
        OptimizerOps.checkAdamW(params, grads, m, v, offset, length, config, step, gradScale);
        shared(pool, grads, m, v, length);
        Check.shared("params", params, pool.threads());
        disjoint("params", params, length * 4, grads, m, v, length);
        Coefficients c = new Coefficients(config, step, gradScale);
        Tasks.ranges(pool, length, CHUNK, (task, from, to) -> chunk(params, null, grads, m, v, from, to, c, 0, 0, null));
    }

    /**
     * AdamW on fp32 master weights, then {@code paramsBf16[i] = Bf16.fromFloatStochastic(master[i],
     * CounterRng.bits(seed, offset + i))}. Use a fresh seed per step.
     *
     * @param paramsBf16 {@code length} bf16 values, written
     * @param master     {@code length} fp32 values, updated
     */
    public static void updateBf16(Parallel pool, MemorySegment paramsBf16, MemorySegment master, MemorySegment grads,
                                  MemorySegment m, MemorySegment v, long offset, long length, AdamWConfig config,
                                  int step, float gradScale, long seed) {
        OptimizerOps.checkAdamWBf16(paramsBf16, master, grads, m, v, offset, length, config, step, gradScale);
        shared(pool, grads, m, v, length);
        Check.shared("master", master, pool.threads());
        Check.shared("paramsBf16", paramsBf16, pool.threads());
        disjoint("master", master, length * 4, grads, m, v, length);
        Check.disjoint("paramsBf16", paramsBf16, length * 2, "master", master, length * 4);
        disjoint("paramsBf16", paramsBf16, length * 2, grads, m, v, length);
        Coefficients c = new Coefficients(config, step, gradScale);
        Tasks.ranges(pool, length, CHUNK, (task, from, to) -> chunk(master, paramsBf16, grads, m, v, from, to, c,
                offset, seed, new int[RANDOM_BLOCK]));
    }

    /** The step's constants, all fp32. */
    private record Coefficients(float lr, float beta1, float oneMinusBeta1, float beta2, float oneMinusBeta2,
                                float eps, float weightDecay, float c1, float c2, float gradScale) {
        Coefficients(AdamWConfig k, int t, float gradScale) {
            this(k.lr(), k.beta1(), 1f - k.beta1(), k.beta2(), 1f - k.beta2(), k.eps(), k.weightDecay(),
                    (float) (1 / (1 - Math.pow(k.beta1(), t))), (float) (1 / (1 - Math.pow(k.beta2(), t))),
                    gradScale);
        }
    }

    /**
     * Elements {@code [from, to)}; with {@code bf16} non-null also their stochastically rounded copy (random bits
     * {@code CounterRng.bits(seed, offset + i)}, made {@value #RANDOM_BLOCK} at a time into {@code random}).
     */
    private static void chunk(MemorySegment p, MemorySegment bf16, MemorySegment g, MemorySegment m, MemorySegment v,
                              long from, long to, Coefficients c, long offset, long seed, int[] random) {
        float gradScale = c.gradScale(), beta1 = c.beta1(), omb1 = c.oneMinusBeta1(), beta2 = c.beta2();
        float omb2 = c.oneMinusBeta2(), c1 = c.c1(), c2 = c.c2(), eps = c.eps(), lr = c.lr(), wd = c.weightDecay();
        long i = from;
        if (VECTOR) {
            long bound = to - (to - from) % L;
            while (i < bound) {
                long blockStart = i, blockEnd = Math.min(bound, i + RANDOM_BLOCK);
                if (bf16 != null) { // a block's random bits first, read back long after
                    RandomBits.fill(random, (int) (blockEnd - blockStart), seed, offset + blockStart);
                }
                for (; i < blockEnd; i += L) {
                    long at = i * 4;
                    FloatVector gs = FloatVector.fromMemorySegment(F, g, at, LE).mul(gradScale);
                    FloatVector mi = FloatVector.fromMemorySegment(F, m, at, LE).mul(beta1).add(gs.mul(omb1));
                    FloatVector vi = FloatVector.fromMemorySegment(F, v, at, LE).mul(beta2)
                            .add(gs.mul(gs).mul(omb2));
                    mi.intoMemorySegment(m, at, LE);
                    vi.intoMemorySegment(v, at, LE);
                    FloatVector pi = FloatVector.fromMemorySegment(F, p, at, LE);
                    FloatVector upd = mi.mul(c1).div(vi.mul(c2).lanewise(VectorOperators.SQRT).add(eps))
                            .add(pi.mul(wd));
                    pi.sub(upd.mul(lr)).intoMemorySegment(p, at, LE);
                    if (bf16 != null) { // Bf16.fromFloatStochastic lane-wise, on the bits just stored
                        IntVector bits = IntVector.fromMemorySegment(I, p, at, LE);
                        IntVector r = IntVector.fromArray(I, random, (int) (i - blockStart)).and(0xFFFF);
                        IntVector code = bits.add(r).lanewise(LSHR, 16).blend(bits.lanewise(LSHR, 16).or(0x40),
                                bits.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
                        code.convertShape(VectorOperators.I2S, S, 0).intoMemorySegment(bf16, i * 2, LE);
                    }
                }
            }
        }
        for (; i < to; i++) { // the same fp32 operations in the same order as the lanes above
            long at = i * 4;
            float gs = g.get(F32, at) * gradScale;
            float mi = m.get(F32, at) * beta1 + gs * omb1;
            float vi = v.get(F32, at) * beta2 + gs * gs * omb2;
            m.set(F32, at, mi);
            v.set(F32, at, vi);
            float pi = p.get(F32, at);
            float upd = mi * c1 / ((float) Math.sqrt(vi * c2) + eps) + pi * wd;
            float pn = pi - upd * lr;
            p.set(F32, at, pn);
            if (bf16 != null) {
                bf16.set(I16, i * 2, Bf16.fromFloatStochastic(pn, CounterRng.bits(seed, offset + i)));
            }
        }
    }

    /**
     * What both updates check past the contract's {@link OptimizerOps#checkAdamW}: grads, m and v shared when the pool
     * has several threads, and none of them aliasing another.
     */
    private static void shared(Parallel pool, MemorySegment grads, MemorySegment m, MemorySegment v, long length) {
        Objects.requireNonNull(pool, "pool");
        Check.shared("grads", grads, pool.threads());
        Check.shared("m", m, pool.threads());
        Check.shared("v", v, pool.threads());
        Check.disjoint("m", m, length * 4, "grads", grads, length * 4);
        Check.disjoint("v", v, length * 4, "grads", grads, length * 4);
        Check.disjoint("m", m, length * 4, "v", v, length * 4);
    }

    /** The output {@code out} overlaps none of the {@code length} fp32 values of grads, m, v. */
    private static void disjoint(String name, MemorySegment out, long outBytes, MemorySegment grads, MemorySegment m,
                                 MemorySegment v, long length) {
        long n = length * 4;
        Check.disjoint(name, out, outBytes, "grads", grads, n);
        Check.disjoint(name, out, outBytes, "m", m, n);
        Check.disjoint(name, out, outBytes, "v", v, n);
    }
}
