package io.accel4j.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The tanh GELU and its derivative on one fp32 value or one vector: the arithmetic every CPU GELU shares (the
 * element-wise kernel {@code ops.Gelu} and the GEMM epilogues that fuse GELU into a matmul), so each gets the same
 * bits for the same input.
 *
 * <pre>
 *   u        = √(2/π)·x·(1 + 0.044715·x²)
 *   gelu(x)  = 0.5·x·(1 + tanh u)
 *   gelu'(x) = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²)
 * </pre>
 *
 * <p>tanh is a rational function, {@code u·P(u²)/Q(u²)} with P and Q of degree 4, fitted here (minimax relative
 * error on [0, 9], 0.35·2⁻²⁴ in exact arithmetic) and evaluated with fma in fp32; for |x| ≥ {@value #X0} (u ≥
 * 8.98, where fp32 tanh is 1 or its predecessor) it is ±1, and it is capped at ±1 elsewhere (the fit overshoots 1
 * by up to 4·2⁻²⁴ for u in [8, 9)). With the rounding of u, {@code t(x)} is within 5.7·2⁻²⁴ of
 * {@code tanh(u(x))} for every fp32 x (checked exhaustively), and {@code 1 − t²} ≥ 0. The large-|x| branch is a
 * blend, not a clamp of x, because the Vector API's min/max (Java's NaN and ±0 rules) cost as much as the rest;
 * there the gradient is exactly 1 or 0, and x³ may overflow harmlessly. NaN propagates. The functions use only +,
 * ×, fma, ÷ and comparisons, all exactly rounded, so each element gets the same bits from every vector width, from
 * the scalar form, and before and after the JIT compiles the caller. The Vector API's {@code lanewise(TANH)} would
 * not: compiled it is SVML (0.5 ulp), interpreted it rounds {@code Math.tanh}, and the two disagree on ~0.1 % of
 * inputs, so results changed while the JIT warmed up; it was also 2× slower here than this rational.
 *
 * <p>The vector methods are small so that C2 inlines them into the caller's loop (where the constants' broadcasts
 * are hoisted); they take and return vectors of {@link Simd#FLOAT}.
 */
public final class GeluMath {

    private static final VectorSpecies<Float> S = Simd.FLOAT;

    /** √(2/π). */
    private static final float K = (float) Math.sqrt(2 / Math.PI);
    /** √(2/π)·0.044715, the x³ coefficient inside tanh. */
    private static final float KA = (float) (Math.sqrt(2 / Math.PI) * 0.044715);
    /** √(2/π)·3·0.044715, the x² coefficient of du/dx. */
    private static final float KA3 = (float) (Math.sqrt(2 / Math.PI) * 3 * 0.044715);
    /** From here on tanh u(x) is taken as ±1 (u(X0) = 8.98: tanh is within 0.53·2⁻²⁴ of 1). */
    public static final float X0 = 5.15f;

    // tanh u ≈ u·P(s)/Q(s), s = u²; P(s) = 1 + P1·s + … + P4·s⁴, Q(s) = 1 + Q1·s + … + Q4·s⁴
    private static final float P1 = 1.338103861e-01f, P2 = 3.495602868e-03f, P3 = 2.060931183e-05f,
            P4 = 1.335495536e-08f;
    private static final float Q1 = 4.671435356e-01f, Q2 = 2.587703802e-02f, Q3 = 3.285658313e-04f,
            Q4 = 7.776683901e-07f;

    private GeluMath() {}

    /** {@code gelu(x)} lane by lane. */
    public static FloatVector gelu(FloatVector x) {
        FloatVector t = tanhU(x, x.mul(x));
        FloatVector hx = x.mul(0.5f);
        return hx.fma(t, hx);
    }

    /** {@code gelu'(x)} lane by lane: exactly 1 for x ≥ X0 and 0 for x ≤ −X0. */
    public static FloatVector grad(FloatVector x) {
        FloatVector xx = x.mul(x);
        FloatVector t = tanhU(x, xx);
        FloatVector sech2 = t.neg().fma(t, FloatVector.broadcast(S, 1f));
        FloatVector g = t.fma(0.5f, 0.5f).add(x.mul(0.5f).mul(sech2).mul(xx.fma(KA3, K)));
        return g.blend(1f, x.compare(VectorOperators.GE, X0)).blend(0f, x.compare(VectorOperators.LE, -X0));
    }

    /** tanh u(x), given {@code xx = x·x}: the rational, ±1 beyond ±X0 and capped at ±1. */
    private static FloatVector tanhU(FloatVector x, FloatVector xx) {
        FloatVector u = xx.fma(KA, K).mul(x);
        FloatVector s = u.mul(u);
        FloatVector p = s.fma(P4, P3).fma(s, FloatVector.broadcast(S, P2)).fma(s, FloatVector.broadcast(S, P1))
                .fma(s, FloatVector.broadcast(S, 1f));
        FloatVector q = s.fma(Q4, Q3).fma(s, FloatVector.broadcast(S, Q2)).fma(s, FloatVector.broadcast(S, Q1))
                .fma(s, FloatVector.broadcast(S, 1f));
        FloatVector t = u.mul(p).div(q);
        VectorMask<Float> high = x.compare(VectorOperators.GE, X0), low = x.compare(VectorOperators.LE, -X0);
        return t.blend(1f, high.or(t.compare(VectorOperators.GT, 1f)))
                .blend(-1f, low.or(t.compare(VectorOperators.LT, -1f)));
    }

    /** {@code gelu(x)}: the vector method's operations in the same order. */
    public static float gelu(float x) {
        float hx = 0.5f * x;
        return Math.fma(hx, tanhU(x), hx);
    }

    /** {@code gelu'(x)}: the vector method's operations in the same order. */
    public static float grad(float x) {
        if (x >= X0) {
            return 1f;
        } else if (x <= -X0) {
            return 0f;
        }
        float t = tanhU(x);
        float sech2 = Math.fma(-t, t, 1f);
        return Math.fma(t, 0.5f, 0.5f) + 0.5f * x * sech2 * Math.fma(x * x, KA3, K);
    }

    /** tanh u(x), scalar. */
    private static float tanhU(float x) {
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
}
