package io.accel4j.cpu.ops;

import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * GELU, the tanh approximation, over flat fp32 buffers of n floats.
 *
 * <pre>
 *   u        = √(2/π)·x·(1 + 0.044715·x²)
 *   forward:  out (n)  = 0.5·x·(1 + tanh u)
 *   backward: dinp (n) += dout·(0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²))
 * </pre>
 *
 * <p>tanh is a rational function, {@code u·P(u²)/Q(u²)} with P and Q of degree 4, fitted here (minimax relative
 * error on [0, 9], 0.35·2⁻²⁴ in exact arithmetic) and evaluated with fma in fp32; for |x| ≥ {@value #X0} (u ≥
 * 8.98, where fp32 tanh is 1 or its predecessor) it is ±1, and it is capped at ±1 elsewhere (the fit overshoots 1
 * by up to 4·2⁻²⁴ for u in [8, 9)). With the rounding of u, {@code t(x)} is within 5.7·2⁻²⁴ of
 * {@code tanh(u(x))} for every fp32 x (checked exhaustively), and {@code 1 − t²} ≥ 0. The large-|x| branch is a
 * blend, not a clamp of x, because the Vector API's min/max (Java's NaN and ±0 rules) cost as much as the rest;
 * there the gradient is exactly 1 or 0, and x³ may overflow harmlessly. NaN propagates. The function uses only +,
 * ×, fma, ÷ and comparisons, all exactly rounded, so each element gets the same bits from every vector width, from
 * the scalar tail, and before and after the JIT compiles the loop. The Vector API's {@code lanewise(TANH)} would
 * not: compiled it is SVML (0.5 ulp), interpreted it rounds {@code Math.tanh}, and the two disagree on ~0.1 % of
 * inputs, so results changed while the JIT warmed up; it was also 2× slower here than this rational.
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

    /** √(2/π). */
    private static final float K = (float) Math.sqrt(2 / Math.PI);
    /** √(2/π)·0.044715, the x³ coefficient inside tanh. */
    private static final float KA = (float) (Math.sqrt(2 / Math.PI) * 0.044715);
    /** √(2/π)·3·0.044715, the x² coefficient of du/dx. */
    private static final float KA3 = (float) (Math.sqrt(2 / Math.PI) * 3 * 0.044715);
    /** From here on tanh u(x) is taken as ±1 (u(X0) = 8.98: tanh is within 0.53·2⁻²⁴ of 1). */
    static final float X0 = 5.15f;

    // tanh u ≈ u·P(s)/Q(s), s = u²; P(s) = 1 + P1·s + … + P4·s⁴, Q(s) = 1 + Q1·s + … + Q4·s⁴
    private static final float P1 = 1.338103861e-01f, P2 = 3.495602868e-03f, P3 = 2.060931183e-05f,
            P4 = 1.335495536e-08f;
    private static final float Q1 = 4.671435356e-01f, Q2 = 2.587703802e-02f, Q3 = 3.285658313e-04f,
            Q4 = 7.776683901e-07f;

    private Gelu() {}

    /** {@code out = gelu(inp)}, n floats each; {@code out} may be exactly {@code inp}. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp, long n) {
        Objects.requireNonNull(pool, "pool");
        Check.nonNegative("n", n);
        Check.floats("out", out, n);
        Check.floats("inp", inp, n);
        Check.shared("out", out, pool.threads());
        Check.shared("inp", inp, pool.threads());
        Check.sameOrDisjoint("out", out, "inp", inp, n * Float.BYTES);
        Tasks.ranges(pool, n, Tasks.CHUNK, 2 * n, (k, from, to) -> forwardRange(out, inp, from, to));
    }

    private static void forwardRange(MemorySegment out, MemorySegment inp, long from, long to) {
        long i = from;
        if (!Simd.SCALAR) {
            FloatVector p1 = FloatVector.broadcast(S, P1), p2 = FloatVector.broadcast(S, P2);
            FloatVector q1 = FloatVector.broadcast(S, Q1), q2 = FloatVector.broadcast(S, Q2);
            FloatVector one = FloatVector.broadcast(S, 1f);
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                FloatVector x = FloatVector.fromMemorySegment(S, inp, o, LE);
                FloatVector u = x.mul(x).fma(KA, K).mul(x);
                FloatVector s = u.mul(u);
                FloatVector p = s.fma(P4, P3).fma(s, p2).fma(s, p1).fma(s, one);
                FloatVector q = s.fma(Q4, Q3).fma(s, q2).fma(s, q1).fma(s, one);
                FloatVector t = u.mul(p).div(q);
                VectorMask<Float> high = x.compare(VectorOperators.GE, X0), low = x.compare(VectorOperators.LE, -X0);
                t = t.blend(1f, high.or(t.compare(VectorOperators.GT, 1f)))
                        .blend(-1f, low.or(t.compare(VectorOperators.LT, -1f)));
                FloatVector hx = x.mul(0.5f);
                hx.fma(t, hx).intoMemorySegment(out, o, LE);
            }
        }
        for (; i < to; i++) {
            float x = inp.getAtIndex(F32, i);
            float hx = 0.5f * x;
            out.setAtIndex(F32, i, Math.fma(hx, tanh(x), hx));
        }
    }

    /** The scalar tail's tanh u(x): the vector loops' operations, in the same order. */
    private static float tanh(float x) {
        float u = Math.fma(x * x, KA, K) * x;
        float s = u * u;
        float p = Math.fma(Math.fma(Math.fma(Math.fma(s, P4, P3), s, P2), s, P1), s, 1f);
        float q = Math.fma(Math.fma(Math.fma(Math.fma(s, Q4, Q3), s, Q2), s, Q1), s, 1f);
        float t = u * p / q;
        if (x >= X0 || t > 1f) {
            return 1f;
        } else if (x <= -X0 || t < -1f) {
            return -1f;
        }
        return t;
    }

    /** {@code dinp += gelu'(inp)·dout}, n floats each. */
    public static void backward(Parallel pool, MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        Objects.requireNonNull(pool, "pool");
        Check.nonNegative("n", n);
        Check.floats("dinp", dinp, n);
        Check.floats("inp", inp, n);
        Check.floats("dout", dout, n);
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
            FloatVector p1 = FloatVector.broadcast(S, P1), p2 = FloatVector.broadcast(S, P2);
            FloatVector q1 = FloatVector.broadcast(S, Q1), q2 = FloatVector.broadcast(S, Q2);
            FloatVector one = FloatVector.broadcast(S, 1f);
            for (long bound = to - (to - from) % L; i < bound; i += L) {
                long o = i * Float.BYTES;
                FloatVector x = FloatVector.fromMemorySegment(S, inp, o, LE);
                FloatVector xx = x.mul(x);
                FloatVector u = xx.fma(KA, K).mul(x);
                FloatVector s = u.mul(u);
                FloatVector p = s.fma(P4, P3).fma(s, p2).fma(s, p1).fma(s, one);
                FloatVector q = s.fma(Q4, Q3).fma(s, q2).fma(s, q1).fma(s, one);
                FloatVector t = u.mul(p).div(q);
                VectorMask<Float> high = x.compare(VectorOperators.GE, X0), low = x.compare(VectorOperators.LE, -X0);
                t = t.blend(1f, high.or(t.compare(VectorOperators.GT, 1f)))
                        .blend(-1f, low.or(t.compare(VectorOperators.LT, -1f)));
                FloatVector sech2 = t.neg().fma(t, one);
                FloatVector grad = t.fma(0.5f, 0.5f).add(x.mul(0.5f).mul(sech2).mul(xx.fma(KA3, K)));
                grad = grad.blend(1f, high).blend(0f, low);
                grad.fma(FloatVector.fromMemorySegment(S, dout, o, LE), FloatVector.fromMemorySegment(S, dinp, o, LE))
                        .intoMemorySegment(dinp, o, LE);
            }
        }
        for (; i < to; i++) {
            float x = inp.getAtIndex(F32, i);
            float grad;
            if (x >= X0) {
                grad = 1f;
            } else if (x <= -X0) {
                grad = 0f;
            } else {
                float t = tanh(x);
                float sech2 = Math.fma(-t, t, 1f);
                grad = Math.fma(t, 0.5f, 0.5f) + 0.5f * x * sech2 * Math.fma(x * x, KA3, K);
            }
            dinp.setAtIndex(F32, i, Math.fma(grad, dout.getAtIndex(F32, i), dinp.getAtIndex(F32, i)));
        }
    }
}
