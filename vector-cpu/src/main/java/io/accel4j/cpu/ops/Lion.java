package io.accel4j.cpu.ops;

import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.OptimizerOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fused Lion over a range of the parameter vector (Chen et al. 2023, "Symbolic Discovery of Optimization
 * Algorithms"), one pass over memory.
 *
 * <p>Shapes: {@code params}, {@code grads}, {@code m} hold the range's {@code length} fp32 elements from their start.
 * For each element, in fp32, with {@code decay = 1 − lr·λ} ({@link LionConfig#decayFactor()}: float64, rounded once)
 * and {@code 1 − β1}, {@code 1 − β2} rounded to fp32 once:
 * <pre>
 *   g = grads[i]·gradScale
 *   c = β1·m[i] + (1−β1)·g
 *   s = c &gt; 0 ? 1 : c &lt; 0 ? −1 : c == 0 ? 0 : NaN        (sign, sign(±0) = +0, NaN stays NaN)
 *   p[i] = p[i]·decay − s·lr                                (s·lr is exact)
 *   m[i] = β2·m[i] + (1−β2)·g
 * </pre>
 * Every operation is an IEEE fp32 operation (no fused multiply-add), done identically by the vector lanes and the
 * scalar tail, so an element's result does not depend on where the range is split or on the thread count; the range
 * is cut into fixed chunks of {@value #CHUNK} elements spread over the pool. The CUDA kernel {@code lion.cu} does the
 * same operations in the same order.
 *
 * <p>Per element it reads 12 bytes and writes 8: memory-bound everywhere.
 */
public final class Lion {

    private Lion() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final int L = F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    /** Elements per task. */
    static final int CHUNK = 1 << 16;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    /**
     * Lion on fp32 parameters: updates {@code params} and {@code m} from {@code grads} (see the class comment).
     *
     * @param offset    index of the range's first element in the whole vector, ≥ 0 (unused by the update)
     * @param gradScale finite; multiplies the gradients (clipping, loss-scale unscaling)
     */
    public static void update(Parallel pool, MemorySegment params, MemorySegment grads, MemorySegment m,
                              long offset, long length, LionConfig config, float gradScale) {
        Objects.requireNonNull(pool, "pool");
        Objects.requireNonNull(config, "config");
        OptimizerOps.checkLion(params, grads, m, offset, length, config, gradScale);
        long bytes = length * 4;
        Check.shared("params", params, pool.threads());
        Check.shared("grads", grads, pool.threads());
        Check.shared("m", m, pool.threads());
        Check.disjoint("params", params, bytes, "grads", grads, bytes);
        Check.disjoint("m", m, bytes, "grads", grads, bytes);
        Check.disjoint("m", m, bytes, "params", params, bytes);
        Coefficients c = new Coefficients(config, gradScale);
        Tasks.ranges(pool, length, CHUNK, length * 5, (task, from, to) -> chunk(params, grads, m, from, to, c));
    }

    /** The step's constants, all fp32. */
    private record Coefficients(float lr, float beta1, float oneMinusBeta1, float beta2, float oneMinusBeta2,
                                float decay, float gradScale) {
        Coefficients(LionConfig k, float gradScale) {
            this(k.lr(), k.beta1(), 1f - k.beta1(), k.beta2(), 1f - k.beta2(), k.decayFactor(), gradScale);
        }
    }

    /** Elements {@code [from, to)}. */
    private static void chunk(MemorySegment p, MemorySegment g, MemorySegment m, long from, long to, Coefficients c) {
        float gradScale = c.gradScale(), beta1 = c.beta1(), omb1 = c.oneMinusBeta1(), beta2 = c.beta2();
        float omb2 = c.oneMinusBeta2(), decay = c.decay(), lr = c.lr();
        long i = from;
        if (VECTOR) {
            FloatVector zero = FloatVector.zero(F), one = FloatVector.broadcast(F, 1f);
            FloatVector minusOne = FloatVector.broadcast(F, -1f);
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long at = i * 4;
                FloatVector gs = FloatVector.fromMemorySegment(F, g, at, LE).mul(gradScale);
                FloatVector mi = FloatVector.fromMemorySegment(F, m, at, LE);
                FloatVector ci = mi.mul(beta1).add(gs.mul(omb1));
                FloatVector s = zero.blend(one, ci.compare(VectorOperators.GT, 0f))
                        .blend(minusOne, ci.compare(VectorOperators.LT, 0f))
                        .blend(ci, ci.test(VectorOperators.IS_NAN));
                FloatVector pi = FloatVector.fromMemorySegment(F, p, at, LE);
                pi.mul(decay).sub(s.mul(lr)).intoMemorySegment(p, at, LE);
                mi.mul(beta2).add(gs.mul(omb2)).intoMemorySegment(m, at, LE);
            }
        }
        for (; i < to; i++) { // the same fp32 operations in the same order as the lanes above
            long at = i * 4;
            float gs = g.get(F32, at) * gradScale;
            float mi = m.get(F32, at);
            float ci = mi * beta1 + gs * omb1;
            p.set(F32, at, p.get(F32, at) * decay - sign(ci) * lr);
            m.set(F32, at, mi * beta2 + gs * omb2);
        }
    }

    /** 1 for c &gt; 0, −1 for c &lt; 0, +0 for ±0, NaN for NaN (the lanes' blend above). */
    static float sign(float c) {
        return c > 0 ? 1f : c < 0 ? -1f : c == 0 ? 0f : c;
    }
}
