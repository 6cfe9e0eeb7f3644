package io.accel4j.cpu.ops;

import io.accel4j.core.ops.PointwiseOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.GeluMath;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * GELU, the tanh approximation, over flat fp32 buffers of n floats.
 *
 * <pre>
 *   forward:  out (n)  = gelu(inp) = 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))
 *   backward: dinp (n) += gelu'(inp)·dout
 * </pre>
 *
 * <p>The arithmetic, a rational tanh exact to a few ulp with the same bits from every vector width, the scalar
 * tail and every JIT tier, is {@link GeluMath}'s, shared with the GEMM epilogues that fuse GELU into a matmul
 * ({@link Matmul#forwardGelu}, {@link Matmul#backwardGelu}).
 *
 * <p>The work is split into fixed chunks of {@link Tasks#CHUNK} floats, so results do not depend on the thread
 * count. The forward may run in place ({@code out} the same memory as {@code inp}, see {@link Check#sameOrDisjoint}); the
 * backward's {@code dinp} must not overlap {@code inp} or {@code dout}.
 */
public final class Gelu {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int L = S.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** From here on tanh u(x) is taken as ±1 ({@link GeluMath#X0}). */
    static final float X0 = GeluMath.X0;

    private Gelu() {}

    /** {@code out = gelu(inp)}, n floats each; {@code out} may be exactly {@code inp}. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp, long n) {
        Objects.requireNonNull(pool, "pool");
        PointwiseOps.checkGeluForward(out, inp, n);
        Check.shared("out", out, pool.threads());
        Check.shared("inp", inp, pool.threads());
        Check.sameOrDisjoint("out", out, "inp", inp, n * Float.BYTES);
        Tasks.ranges(pool, n, Tasks.CHUNK, 2 * n, (k, from, to) -> forwardRange(out, inp, from, to));
    }

    private static void forwardRange(MemorySegment out, MemorySegment inp, long from, long to) {
        long i = from;
        if (!Simd.SCALAR) {
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                GeluMath.gelu(FloatVector.fromMemorySegment(S, inp, o, LE)).intoMemorySegment(out, o, LE);
            }
        }
        for (; i < to; i++) {
            out.setAtIndex(F32, i, GeluMath.gelu(inp.getAtIndex(F32, i)));
        }
    }

    /** {@code dinp += gelu'(inp)·dout}, n floats each. */
    public static void backward(Parallel pool, MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        Objects.requireNonNull(pool, "pool");
        PointwiseOps.checkGeluBackward(dinp, inp, dout, n);
        Check.shared("dinp", dinp, pool.threads());
        Check.shared("inp", inp, pool.threads());
        Check.shared("dout", dout, pool.threads());
        long bytes = n * Float.BYTES;
        Check.disjoint("dinp", dinp, bytes, "inp", inp, bytes);
        Check.disjoint("dinp", dinp, bytes, "dout", dout, bytes);
        Tasks.ranges(pool, n, Tasks.CHUNK, 4 * n, (k, from, to) -> backwardRange(dinp, inp, dout, from, to));
    }

    private static void backwardRange(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long from, long to) {
        long i = from;
        if (!Simd.SCALAR) {
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                FloatVector grad = GeluMath.grad(FloatVector.fromMemorySegment(S, inp, o, LE));
                grad.fma(FloatVector.fromMemorySegment(S, dout, o, LE), FloatVector.fromMemorySegment(S, dinp, o, LE))
                        .intoMemorySegment(dinp, o, LE);
            }
        }
        for (; i < to; i++) {
            float grad = GeluMath.grad(inp.getAtIndex(F32, i));
            dinp.setAtIndex(F32, i, Math.fma(grad, dout.getAtIndex(F32, i), dinp.getAtIndex(F32, i)));
        }
    }
}
