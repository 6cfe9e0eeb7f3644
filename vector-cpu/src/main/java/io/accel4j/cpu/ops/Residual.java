package io.accel4j.cpu.ops;

import io.accel4j.core.ops.PointwiseOps;
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
 * The residual add over flat fp32 buffers of n floats.
 *
 * <pre>
 *   forward:  out (n)   = inp1 + inp2
 *   backward: dinp1 (n) += dout,  dinp2 (n) += dout
 * </pre>
 * The work is split into fixed chunks of {@link Tasks#CHUNK} floats; every element is computed the same way whatever
 * the thread count. The forward may run in place ({@code out} the same memory as {@code inp1} or {@code inp2}, see
 * {@link Check#sameOrDisjoint}); the backward's gradients must not overlap {@code dout} or each other.
 */
public final class Residual {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int L = S.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private Residual() {}

    /** {@code out = inp1 + inp2}, n floats each; {@code out} may be exactly {@code inp1} or {@code inp2}. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        Objects.requireNonNull(pool, "pool");
        PointwiseOps.checkResidualForward(out, inp1, inp2, n);
        Check.shared("out", out, pool.threads());
        Check.shared("inp1", inp1, pool.threads());
        Check.shared("inp2", inp2, pool.threads());
        Check.sameOrDisjoint("out", out, "inp1", inp1, n * Float.BYTES);
        Check.sameOrDisjoint("out", out, "inp2", inp2, n * Float.BYTES);
        Tasks.ranges(pool, n, Tasks.CHUNK, 3 * n, (k, from, to) -> forwardRange(out, inp1, inp2, from, to));
    }

    private static void forwardRange(MemorySegment out, MemorySegment a, MemorySegment b, long from, long to) {
        long i = from;
        if (!Simd.SCALAR) {
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                FloatVector.fromMemorySegment(S, a, o, LE).add(FloatVector.fromMemorySegment(S, b, o, LE))
                        .intoMemorySegment(out, o, LE);
            }
        }
        for (; i < to; i++) {
            out.setAtIndex(F32, i, a.getAtIndex(F32, i) + b.getAtIndex(F32, i));
        }
    }

    /** {@code dinp1 += dout}, {@code dinp2 += dout}, n floats each. */
    public static void backward(Parallel pool, MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        Objects.requireNonNull(pool, "pool");
        PointwiseOps.checkResidualBackward(dinp1, dinp2, dout, n);
        Check.shared("dinp1", dinp1, pool.threads());
        Check.shared("dinp2", dinp2, pool.threads());
        Check.shared("dout", dout, pool.threads());
        long bytes = n * Float.BYTES;
        Check.disjoint("dinp1", dinp1, bytes, "dout", dout, bytes);
        Check.disjoint("dinp2", dinp2, bytes, "dout", dout, bytes);
        Check.disjoint("dinp1", dinp1, bytes, "dinp2", dinp2, bytes);
        Tasks.ranges(pool, n, Tasks.CHUNK, 5 * n,
                (k, from, to) -> backwardRange(dinp1, dinp2, dout, from, to));
    }

    private static void backwardRange(MemorySegment d1, MemorySegment d2, MemorySegment dout, long from, long to) {
        long i = from;
        if (!Simd.SCALAR) {
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                FloatVector g = FloatVector.fromMemorySegment(S, dout, o, LE);
                FloatVector.fromMemorySegment(S, d1, o, LE).add(g).intoMemorySegment(d1, o, LE);
                FloatVector.fromMemorySegment(S, d2, o, LE).add(g).intoMemorySegment(d2, o, LE);
            }
        }
        for (; i < to; i++) {
            float g = dout.getAtIndex(F32, i);
            d1.setAtIndex(F32, i, d1.getAtIndex(F32, i) + g);
            d2.setAtIndex(F32, i, d2.getAtIndex(F32, i) + g);
        }
    }
}
