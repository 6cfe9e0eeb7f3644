package io.accel4j.cpu.ops;

import io.accel4j.cpu.Simd;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * exp and the softmax steps of {@link FlashAttention} on its BLK×BLK score tiles (row-major float[]s, BLK a
 * multiple of the vector length, so no loop has a tail): the causal mask, the online softmax's running max and
 * sum, the rescale of O, the recomputed probabilities and their backward. {@link NaiveAttention} uses
 * {@link #expRow}. Every result is the same bits in every JIT tier: only fma, add, mul, compares and bit moves,
 * and sums across lanes in a fixed order.
 */
final class Softmax {

    private Softmax() {}

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int V = S.length();
    private static final int BLK = FlashAttention.BLOCK;

    // exp(x) in fp32 from fma, add and bit moves only, so that vector lanes, the scalar path and the Vector API's
    // Java fallbacks (what runs before C2 compiles) give the same bits: x = n·ln2 + f with n = round(x·log2 e),
    // |f| ≤ ln2/2 (Cody–Waite, ln2 in two parts), e^f by Cephes' expf polynomial, 2ⁿ built in the exponent field.
    // x below −88 becomes −88, where n = −127 makes the result exactly 0, so exp(−∞) = 0 (the mask); NaN stays
    // NaN; x must be ≤ 88. Within 1 ulp of exp for normal results (AttentionTest checks 2), about as fast here as
    // EXP's SVML call.
    static final float EXP_LO = -88f, LOG2E = 1.44269504088896341f, ROUND = 0x1.8p23f;
    static final float LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f;
    static final float P0 = 1.9875691500e-4f, P1 = 1.3981999507e-3f, P2 = 8.3334519073e-3f, P3 = 4.1665795894e-2f,
            P4 = 1.6666665459e-1f, P5 = 5.0000001201e-1f;
    static final int ONE_BITS = 0x3F800000;

    /** The scalar exp, bit for bit what a vector lane of {@link #expShift} computes. */
    static float exp(float x) {
        return exp(x, EXP_LO);
    }

    /**
     * The scalar exp with arguments below {@code lo} raised to it, bit for bit a lane of
     * {@link #exp(FloatVector, float)}. {@code lo} in [−88.3, −87]: there n ≥ −127, and n = −127 gives exactly 0.
     */
    static float exp(float x, float lo) {
        x = x < lo ? lo : x;
        float t = Math.fma(x, LOG2E, ROUND);
        float n = t - ROUND;
        float f = Math.fma(n, -LN2_LO, Math.fma(n, -LN2_HI, x));
        float p = Math.fma(Math.fma(Math.fma(Math.fma(Math.fma(P0, f, P1), f, P2), f, P3), f, P4), f, P5);
        float y = Math.fma(p, f * f, f) + 1f;
        return y * Float.intBitsToFloat((Float.floatToRawIntBits(t) << 23) + ONE_BITS);
    }

    /**
     * exp lane by lane, arguments below {@code lo} raised to it: the same operations as {@link #exp(float, float)}
     * and as {@link #expShift}'s and {@link #expRow}'s loops. The clamp is a compare and a blend ({@code max()} with
     * Java's NaN and −0 rules costs 3×), and 2ⁿ comes from the bits of {@code t = x·log2e + ROUND}, which hold
     * ROUND + n, not from a float-to-int conversion, whose Java rules cost C2 a fix-up per lane. Small, so that C2
     * inlines it into a caller's loop and hoists its constants' broadcasts (the fused classifier's). Attention's two
     * loops keep it written out: calling it there made flash attention 1.5–5.7 % slower (T = 256, one thread, three
     * alternated JVM pairs).
     */
    static FloatVector exp(FloatVector x, float lo) {
        FloatVector v = x.blend(lo, x.lt(lo));
        FloatVector t = v.fma(LOG2E, ROUND);
        FloatVector n = t.sub(ROUND);
        FloatVector f = n.fma(FloatVector.broadcast(S, -LN2_LO), n.fma(FloatVector.broadcast(S, -LN2_HI), v));
        FloatVector p = f.fma(P0, P1).fma(f, FloatVector.broadcast(S, P2)).fma(f, FloatVector.broadcast(S, P3))
                .fma(f, FloatVector.broadcast(S, P4)).fma(f, FloatVector.broadcast(S, P5));
        FloatVector y = p.fma(f.mul(f), f).add(1f);
        return y.mul(t.reinterpretAsInts().lanewise(VectorOperators.LSHL, 23).add(ONE_BITS).reinterpretAsFloats());
    }

    /**
     * {@code x[y·BLK + z] = exp(x[y·BLK + z] − shift[perRow ? y : z])} for y &lt; rows, z &lt; BLK: the shift is
     * per row of the tile or per column. Valid for arguments ≤ 88 (they are ≤ 0 up to rounding here).
     */
    static void expShift(float[] x, int rows, float[] shift, boolean perRow) {
        int n = rows * BLK;
        int i = 0;
        if (!Simd.SCALAR) {
            FloatVector p1 = FloatVector.broadcast(S, P1), p2 = FloatVector.broadcast(S, P2);
            FloatVector p3 = FloatVector.broadcast(S, P3), p4 = FloatVector.broadcast(S, P4);
            FloatVector p5 = FloatVector.broadcast(S, P5);
            FloatVector ln2Hi = FloatVector.broadcast(S, -LN2_HI), ln2Lo = FloatVector.broadcast(S, -LN2_LO);
            for (; i < n; i += V) {
                FloatVector sh = perRow ? FloatVector.broadcast(S, shift[i / BLK])
                        : FloatVector.fromArray(S, shift, i & (BLK - 1));
                FloatVector v = FloatVector.fromArray(S, x, i).sub(sh);
                v = v.blend(EXP_LO, v.lt(EXP_LO)); // a compare and a blend; max() with Java's NaN and −0 rules costs 3×
                FloatVector t = v.fma(LOG2E, ROUND);
                FloatVector k = t.sub(ROUND);
                FloatVector f = k.fma(ln2Lo, k.fma(ln2Hi, v));
                FloatVector p = f.fma(P0, P1).fma(f, p2).fma(f, p3).fma(f, p4).fma(f, p5);
                FloatVector y = p.fma(f.mul(f), f).add(1f);
                FloatVector two = t.reinterpretAsInts().lanewise(VectorOperators.LSHL, 23).add(ONE_BITS)
                        .reinterpretAsFloats();
                y.mul(two).intoArray(x, i);
            }
        }
        for (; i < n; i++) {
            x[i] = exp(x[i] - shift[perRow ? i / BLK : i & (BLK - 1)]);
        }
    }

    /**
     * {@code x[off + i] = exp(x[off + i] − shift)} for i &lt; n (any n; the tail lanes by {@link #exp}, which
     * gives the same bits); returns {@code Σ_i x[off + i]}, summed lane-wise and then lane by lane in order, so the
     * sum is the same in every JIT tier ({@code reduceLanes} is not). {@code lanes} holds one vector.
     */
    static float expRow(float[] x, int off, int n, float shift, float[] lanes) {
        int i = 0;
        float sum = 0f;
        if (!Simd.SCALAR) {
            FloatVector p1 = FloatVector.broadcast(S, P1), p2 = FloatVector.broadcast(S, P2);
            FloatVector p3 = FloatVector.broadcast(S, P3), p4 = FloatVector.broadcast(S, P4);
            FloatVector p5 = FloatVector.broadcast(S, P5);
            FloatVector ln2Hi = FloatVector.broadcast(S, -LN2_HI), ln2Lo = FloatVector.broadcast(S, -LN2_LO);
            FloatVector acc = FloatVector.zero(S);
            for (int bound = S.loopBound(n); i < bound; i += V) {
                FloatVector v = FloatVector.fromArray(S, x, off + i).sub(shift);
                v = v.blend(EXP_LO, v.lt(EXP_LO));
                FloatVector t = v.fma(LOG2E, ROUND);
                FloatVector k = t.sub(ROUND);
                FloatVector f = k.fma(ln2Lo, k.fma(ln2Hi, v));
                FloatVector p = f.fma(P0, P1).fma(f, p2).fma(f, p3).fma(f, p4).fma(f, p5);
                FloatVector y = p.fma(f.mul(f), f).add(1f);
                FloatVector two = t.reinterpretAsInts().lanewise(VectorOperators.LSHL, 23).add(ONE_BITS)
                        .reinterpretAsFloats();
                FloatVector e = y.mul(two);
                e.intoArray(x, off + i);
                acc = acc.add(e);
            }
            acc.intoArray(lanes, 0);
            for (int l = 0; l < V; l++) {
                sum += lanes[l];
            }
        }
        for (; i < n; i++) {
            float e = exp(x[off + i] - shift);
            x[off + i] = e;
            sum += e;
        }
        return sum;
    }

    /**
     * The causal mask of a diagonal block (keys after the query get −∞), in a key-major tile {@code s[c·BLK + r]}
     * or a query-major one {@code s[r·BLK + c]}.
     */
    static void maskAbove(float[] s, boolean keyMajor) {
        for (int x = 0; x < BLK; x++) {
            if (keyMajor) {
                Arrays.fill(s, x * BLK, x * BLK + x, Float.NEGATIVE_INFINITY);              // c = x, r < c
            } else {
                Arrays.fill(s, x * BLK + x + 1, (x + 1) * BLK, Float.NEGATIVE_INFINITY);    // r = x, c > r
            }
        }
    }

    /** {@code mx[r] = max(m[r], max_c st[c·BLK + r])}: the new running maximum of each query. */
    static void columnMax(float[] st, float[] m, float[] mx) {
        int r = 0;
        if (!Simd.SCALAR) {
            for (; r < BLK; r += V) {
                FloatVector acc = FloatVector.fromArray(S, m, r);
                for (int o = r; o < BLK * BLK; o += BLK) {
                    acc = acc.max(FloatVector.fromArray(S, st, o));
                }
                acc.intoArray(mx, r);
            }
        }
        for (; r < BLK; r++) {
            float acc = m[r];
            for (int o = r; o < BLK * BLK; o += BLK) {
                acc = Math.max(acc, st[o]);
            }
            mx[r] = acc;
        }
    }

    /** {@code l[r] = alpha[r]·l[r] + Σ_c p[c·BLK + r]}: the running sum of each query. */
    static void columnSum(float[] p, float[] alpha, float[] l) {
        int r = 0;
        if (!Simd.SCALAR) {
            for (; r < BLK; r += V) {
                FloatVector acc = FloatVector.zero(S);
                for (int o = r; o < BLK * BLK; o += BLK) {
                    acc = acc.add(FloatVector.fromArray(S, p, o));
                }
                FloatVector.fromArray(S, l, r).fma(FloatVector.fromArray(S, alpha, r), acc).intoArray(l, r);
            }
        }
        for (; r < BLK; r++) {
            float acc = 0f;
            for (int o = r; o < BLK * BLK; o += BLK) {
                acc += p[o];
            }
            l[r] = Math.fma(l[r], alpha[r], acc);
        }
    }

    /** {@code o[r·ld + n] *= f[r]} for r &lt; BLK, n &lt; ld ({@code ld % NR == 0}). */
    static void scaleRows(float[] o, int ld, float[] f) {
        for (int r = 0; r < BLK; r++) {
            float x = f[r];
            int n = 0;
            if (!Simd.SCALAR) {
                for (; n < ld; n += V) {
                    FloatVector.fromArray(S, o, r * ld + n).mul(x).intoArray(o, r * ld + n);
                }
            }
            for (; n < ld; n++) {
                o[r * ld + n] *= x;
            }
        }
    }

    /** {@code ds[r·BLK + c] = p[r·BLK + c]·(ds[r·BLK + c] − d[t0 + r])}: the softmax backward of a query-major tile. */
    static void softmaxGrad(float[] ds, float[] p, float[] d, int t0) {
        for (int r = 0; r < BLK; r++) {
            float x = d[t0 + r];
            int c = 0;
            if (!Simd.SCALAR) {
                for (; c < BLK; c += V) {
                    int o = r * BLK + c;
                    FloatVector.fromArray(S, ds, o).sub(x).mul(FloatVector.fromArray(S, p, o)).intoArray(ds, o);
                }
            }
            for (; c < BLK; c++) {
                int o = r * BLK + c;
                ds[o] = (ds[o] - x) * p[o];
            }
        }
    }
}
