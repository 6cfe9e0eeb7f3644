package io.accel4j.cpu.ops;

import io.accel4j.core.ops.OptimizerOps;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fused SGD with momentum over a range of the parameter vector (PyTorch's {@code torch.optim.SGD}), one pass over
 * memory.
 *
 * <p>Shapes: {@code params}, {@code grads}, {@code buf} hold the range's {@code length} fp32 elements from their
 * start. For each element, in fp32, with μ, τ, λ the config's momentum, dampening and weight decay and
 * {@code omd = 1 − τ} rounded to fp32 once:
 * <pre>
 *   g = grads[i]·gradScale + λ·p[i]
 *   buf[i] = g                                   step 1 (the old buf[i] is not read)
 *   buf[i] = μ·buf[i] + omd·g                    step ≥ 2
 *   d = nesterov ? g + μ·buf[i] : buf[i]         (d = g, buf untouched, when μ = 0)
 *   p[i] = p[i] − lr·d
 * </pre>
 * Every operation is an IEEE fp32 operation (no fused multiply-add), done identically by the vector lanes and the
 * scalar tail, so an element's result does not depend on where the range is split or on the thread count; the range
 * is cut into fixed chunks of {@value #CHUNK} elements spread over the pool. The CUDA kernel {@code sgd.cu} does the
 * same operations in the same order.
 *
 * <p>Per element it reads 12 bytes and writes 8 (8 and 4 without momentum): memory-bound everywhere.
 */
public final class Sgd {

    private Sgd() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final int L = F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    /** Elements per task. */
    static final int CHUNK = 1 << 16;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    /**
     * SGD with momentum on fp32 parameters: updates {@code params} and {@code buf} from {@code grads} (see the class
     * comment; {@code buf} is neither read nor written, and not checked, when the momentum is 0).
     *
     * @param offset    index of the range's first element in the whole vector, ≥ 0 (unused by the update)
     * @param step      t ≥ 1; step 1 sets {@code buf = g}
     * @param gradScale finite; multiplies the gradients (clipping, loss-scale unscaling)
     */
    public static void update(Parallel pool, MemorySegment params, MemorySegment grads, MemorySegment buf,
                              long offset, long length, SgdConfig config, int step, float gradScale) {
        Objects.requireNonNull(pool, "pool");
        Objects.requireNonNull(config, "config");
        OptimizerOps.checkSgd(params, grads, buf, offset, length, config, step, gradScale);
        long bytes = length * 4;
        Check.shared("params", params, pool.threads());
        Check.shared("grads", grads, pool.threads());
        Check.disjoint("params", params, bytes, "grads", grads, bytes);
        boolean momentum = config.momentum() != 0;
        if (momentum) {
            Check.shared("buf", buf, pool.threads());
            Check.disjoint("buf", buf, bytes, "grads", grads, bytes);
            Check.disjoint("buf", buf, bytes, "params", params, bytes);
        }
        Coefficients c = new Coefficients(config, step == 1, gradScale);
        Tasks.ranges(pool, length, CHUNK, length * (momentum ? 5 : 3),
                (task, from, to) -> chunk(params, grads, buf, from, to, c));
    }

    /** The step's constants, all fp32, and its mode. */
    private record Coefficients(float lr, float momentum, float oneMinusDampening, float weightDecay, float gradScale,
                                boolean hasMomentum, boolean first, boolean nesterov) {
        Coefficients(SgdConfig k, boolean first, float gradScale) {
            this(k.lr(), k.momentum(), 1f - k.dampening(), k.weightDecay(), gradScale, k.momentum() != 0, first,
                    k.nesterov());
        }
    }

    /** Elements {@code [from, to)}. */
    private static void chunk(MemorySegment p, MemorySegment g, MemorySegment b, long from, long to, Coefficients c) {
        float gradScale = c.gradScale(), wd = c.weightDecay(), mu = c.momentum(), omd = c.oneMinusDampening();
        float lr = c.lr();
        boolean hasMomentum = c.hasMomentum(), first = c.first(), nesterov = c.nesterov();
        long i = from;
        if (VECTOR) {
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long at = i * 4;
                FloatVector pi = FloatVector.fromMemorySegment(F, p, at, LE);
                FloatVector gi = FloatVector.fromMemorySegment(F, g, at, LE).mul(gradScale).add(pi.mul(wd));
                FloatVector d = gi;
                if (hasMomentum) {
                    FloatVector bi = first ? gi
                            : FloatVector.fromMemorySegment(F, b, at, LE).mul(mu).add(gi.mul(omd));
                    bi.intoMemorySegment(b, at, LE);
                    d = nesterov ? gi.add(bi.mul(mu)) : bi;
                }
                pi.sub(d.mul(lr)).intoMemorySegment(p, at, LE);
            }
        }
        for (; i < to; i++) { // the same fp32 operations in the same order as the lanes above
            long at = i * 4;
            float pi = p.get(F32, at);
            float gi = g.get(F32, at) * gradScale + pi * wd;
            float d = gi;
            if (hasMomentum) {
                float bi = first ? gi : b.get(F32, at) * mu + gi * omd;
                b.set(F32, at, bi);
                d = nesterov ? gi + bi * mu : bi;
            }
            p.set(F32, at, pi - d * lr);
        }
    }
}
