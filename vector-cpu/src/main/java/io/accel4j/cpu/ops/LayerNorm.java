package io.accel4j.cpu.ops;

import io.accel4j.core.ops.LayerNormOps;
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
 * Layer normalisation over the last dimension, ε = {@link LayerNormOps#EPS}.
 *
 * <pre>
 *   forward:  mean (N) = Σ_c x / C,   rstd (N) = 1/√(Σ_c (x − mean)² / C + ε)
 *             out (N,C) = (x − mean)·rstd·weight + bias
 *   backward: x̂ = (x − mean)·rstd,   g = dout·weight
 *             dinp (N,C) += rstd·(g − mean_C(g) − x̂·mean_C(g·x̂))
 *             dweight (C) += Σ_rows dout·x̂,   dbias (C) += Σ_rows dout
 * </pre>
 * All fp32, row-major, rows of C floats; weight and bias are C floats. The forward makes two passes over each row
 * for its statistics, the corrected two-pass method (Chan, Golub and LeVeque): the mean m, then the deviations
 * d = x − m, whose Σd² gives the variance with no cancellation when |mean| ≫ std and whose Σd (zero but for
 * rounding) corrects both: {@code mean = m + Σd/C}, {@code var = (Σd² − (Σd)²/C)/C}. A third pass writes out; a
 * row of GPT-2's C = 768 is 3 KiB and stays in L1 across the passes. Tasks own fixed chunks of {@link #ROWS} rows.
 * In the backward each chunk sums its rows' dweight and dbias contributions in row order into its own slice of a
 * per-call scratch array, and the chunks' partial sums are then added in chunk order: the result depends on N and
 * C only, never on the thread count. Outputs must not overlap the inputs or each other.
 */
public final class LayerNorm {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int L = S.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final long FB = Float.BYTES;

    /** Rows per task; also the backward's reduction chunk (it fixes the order of the dweight/dbias sums). */
    static final int ROWS = 64;

    private LayerNorm() {}

    /** Writes {@code out (N,C)}, {@code mean (N)} and {@code rstd (N)} from {@code inp (N,C)}, weight, bias (C). */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment mean, MemorySegment rstd,
                               MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C) {
        Objects.requireNonNull(pool, "pool");
        LayerNormOps.checkForward(out, mean, rstd, inp, weight, bias, N, C);
        long nc = (long) N * C;
        checkSegments(pool, 3,
                new String[] {"out", "mean", "rstd", "inp", "weight", "bias"},
                new MemorySegment[] {out, mean, rstd, inp, weight, bias},
                new long[] {nc, N, N, nc, C, C});
        Tasks.run(pool, chunks(N), 2 * nc, k -> {
            int r0 = k * ROWS;
            forwardRows(out, mean, rstd, inp, weight, bias, C, r0, Math.min(N, r0 + ROWS));
        });
    }

    private static void forwardRows(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                                    MemorySegment weight, MemorySegment bias, int C, int r0, int r1) {
        int bound = Simd.SCALAR ? 0 : C - C % L;
        float[] lanes = new float[L];
        for (int r = r0; r < r1; r++) {
            long row = (long) r * C * FB;
            // pass 1: the mean
            float sum = 0f;
            int c = 0;
            if (bound > 0) {
                FloatVector acc0 = FloatVector.zero(S), acc1 = FloatVector.zero(S);
                for (; c + 2 * L <= bound; c += 2 * L) {
                    acc0 = acc0.add(FloatVector.fromMemorySegment(S, inp, row + c * FB, LE));
                    acc1 = acc1.add(FloatVector.fromMemorySegment(S, inp, row + (c + L) * FB, LE));
                }
                for (; c < bound; c += L) {
                    acc0 = acc0.add(FloatVector.fromMemorySegment(S, inp, row + c * FB, LE));
                }
                acc0.add(acc1).intoArray(lanes, 0);
                sum = inOrder(lanes);
            }
            for (; c < C; c++) {
                sum += inp.get(F32, row + c * FB);
            }
            float m = sum / C;
            // pass 2: deviations from that mean, Σd and Σd²; Σd (0 in exact arithmetic) corrects the mean
            float sd = 0f, sq = 0f;
            c = 0;
            if (bound > 0) {
                FloatVector d0 = FloatVector.zero(S), d1 = FloatVector.zero(S);
                FloatVector q0 = FloatVector.zero(S), q1 = FloatVector.zero(S);
                for (; c + 2 * L <= bound; c += 2 * L) {
                    FloatVector e0 = FloatVector.fromMemorySegment(S, inp, row + c * FB, LE).sub(m);
                    FloatVector e1 = FloatVector.fromMemorySegment(S, inp, row + (c + L) * FB, LE).sub(m);
                    d0 = d0.add(e0);
                    d1 = d1.add(e1);
                    q0 = e0.fma(e0, q0);
                    q1 = e1.fma(e1, q1);
                }
                for (; c < bound; c += L) {
                    FloatVector e0 = FloatVector.fromMemorySegment(S, inp, row + c * FB, LE).sub(m);
                    d0 = d0.add(e0);
                    q0 = e0.fma(e0, q0);
                }
                d0.add(d1).intoArray(lanes, 0);
                sd = inOrder(lanes);
                q0.add(q1).intoArray(lanes, 0);
                sq = inOrder(lanes);
            }
            for (; c < C; c++) {
                float e = inp.get(F32, row + c * FB) - m;
                sd += e;
                sq = Math.fma(e, e, sq);
            }
            double var = Math.max(0, (sq - (double) sd * sd / C) / C);
            float s = (float) (1 / Math.sqrt(var + LayerNormOps.EPS));
            m += sd / C;
            // pass 3: normalise, scale, shift
            for (c = 0; c < bound; c += L) {
                FloatVector xhat = FloatVector.fromMemorySegment(S, inp, row + c * FB, LE).sub(m).mul(s);
                xhat.fma(FloatVector.fromMemorySegment(S, weight, c * FB, LE),
                        FloatVector.fromMemorySegment(S, bias, c * FB, LE)).intoMemorySegment(out, row + c * FB, LE);
            }
            for (; c < C; c++) {
                float xhat = (inp.get(F32, row + c * FB) - m) * s;
                out.set(F32, row + c * FB, Math.fma(xhat, weight.get(F32, c * FB), bias.get(F32, c * FB)));
            }
            mean.setAtIndex(F32, r, m);
            rstd.setAtIndex(F32, r, s);
        }
    }

    /**
     * Adds the gradients into {@code dinp (N,C)}, {@code dweight (C)} and {@code dbias (C)}, from {@code dout (N,C)},
     * {@code inp (N,C)}, {@code weight (C)} and the forward's {@code mean (N)}, {@code rstd (N)}.
     */
    public static void backward(Parallel pool, MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                MemorySegment dout, MemorySegment inp, MemorySegment weight, MemorySegment mean,
                                MemorySegment rstd, int N, int C) {
        Objects.requireNonNull(pool, "pool");
        LayerNormOps.checkBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
        long nc = (long) N * C;
        checkSegments(pool, 3,
                new String[] {"dinp", "dweight", "dbias", "dout", "inp", "weight", "mean", "rstd"},
                new MemorySegment[] {dinp, dweight, dbias, dout, inp, weight, mean, rstd},
                new long[] {nc, C, C, nc, nc, C, N, N});
        int chunks = chunks(N);
        float[] partial = new float[Math.multiplyExact(chunks, 2 * C)]; // chunk k: dweight at k·2C, dbias at k·2C + C
        Tasks.run(pool, chunks, 4 * nc, k -> {
            int r0 = k * ROWS;
            backwardRows(dinp, dout, inp, weight, mean, rstd, partial, k * 2 * C, C, r0, Math.min(N, r0 + ROWS));
        });
        combine(dweight, dbias, partial, chunks, C);
    }

    private static void backwardRows(MemorySegment dinp, MemorySegment dout, MemorySegment inp, MemorySegment weight,
                                     MemorySegment mean, MemorySegment rstd, float[] partial, int pw, int C,
                                     int r0, int r1) {
        int bound = Simd.SCALAR ? 0 : C - C % L;
        float[] lanes = new float[L];
        int pb = pw + C;
        for (int r = r0; r < r1; r++) {
            long row = (long) r * C * FB;
            float m = mean.getAtIndex(F32, r), s = rstd.getAtIndex(F32, r);
            // pass 1: Σ g and Σ g·x̂
            float gSum = 0f, gxSum = 0f;
            int c = 0;
            if (bound > 0) {
                FloatVector accG = FloatVector.zero(S), accGx = FloatVector.zero(S);
                for (; c < bound; c += L) {
                    FloatVector xhat = FloatVector.fromMemorySegment(S, inp, row + c * FB, LE).sub(m).mul(s);
                    FloatVector g = FloatVector.fromMemorySegment(S, dout, row + c * FB, LE)
                            .mul(FloatVector.fromMemorySegment(S, weight, c * FB, LE));
                    accG = accG.add(g);
                    accGx = g.fma(xhat, accGx);
                }
                accG.intoArray(lanes, 0);
                gSum = inOrder(lanes);
                accGx.intoArray(lanes, 0);
                gxSum = inOrder(lanes);
            }
            for (; c < C; c++) {
                float xhat = (inp.get(F32, row + c * FB) - m) * s;
                float g = dout.get(F32, row + c * FB) * weight.get(F32, c * FB);
                gSum += g;
                gxSum = Math.fma(g, xhat, gxSum);
            }
            float gMean = gSum / C, gxMean = gxSum / C;
            // pass 2: dinp, and this chunk's dweight and dbias
            FloatVector sv = FloatVector.broadcast(S, s);
            for (c = 0; c < bound; c += L) {
                FloatVector xhat = FloatVector.fromMemorySegment(S, inp, row + c * FB, LE).sub(m).mul(s);
                FloatVector d = FloatVector.fromMemorySegment(S, dout, row + c * FB, LE);
                FloatVector g = d.mul(FloatVector.fromMemorySegment(S, weight, c * FB, LE));
                FloatVector dx = g.sub(gMean).sub(xhat.mul(gxMean));
                dx.fma(sv, FloatVector.fromMemorySegment(S, dinp, row + c * FB, LE))
                        .intoMemorySegment(dinp, row + c * FB, LE);
                d.fma(xhat, FloatVector.fromArray(S, partial, pw + c)).intoArray(partial, pw + c);
                d.add(FloatVector.fromArray(S, partial, pb + c)).intoArray(partial, pb + c);
            }
            for (; c < C; c++) {
                float xhat = (inp.get(F32, row + c * FB) - m) * s;
                float d = dout.get(F32, row + c * FB);
                float g = d * weight.get(F32, c * FB);
                dinp.set(F32, row + c * FB, Math.fma(g - gMean - xhat * gxMean, s, dinp.get(F32, row + c * FB)));
                partial[pw + c] = Math.fma(d, xhat, partial[pw + c]);
                partial[pb + c] += d;
            }
        }
    }

    /** {@code dweight += Σ_k partial dweight of chunk k}, the same for dbias, chunks in order. */
    private static void combine(MemorySegment dweight, MemorySegment dbias, float[] partial, int chunks, int C) {
        int bound = Simd.SCALAR ? 0 : C - C % L;
        int c = 0;
        for (; c < bound; c += L) {
            FloatVector w = FloatVector.zero(S), b = FloatVector.zero(S);
            for (int k = 0, p = c; k < chunks; k++, p += 2 * C) {
                w = w.add(FloatVector.fromArray(S, partial, p));
                b = b.add(FloatVector.fromArray(S, partial, p + C));
            }
            w.add(FloatVector.fromMemorySegment(S, dweight, c * FB, LE)).intoMemorySegment(dweight, c * FB, LE);
            b.add(FloatVector.fromMemorySegment(S, dbias, c * FB, LE)).intoMemorySegment(dbias, c * FB, LE);
        }
        for (; c < C; c++) {
            float w = 0f, b = 0f;
            for (int k = 0, p = c; k < chunks; k++, p += 2 * C) {
                w += partial[p];
                b += partial[p + C];
            }
            dweight.set(F32, c * FB, dweight.get(F32, c * FB) + w);
            dbias.set(F32, c * FB, dbias.get(F32, c * FB) + b);
        }
    }

    private static int chunks(int N) {
        return (N + ROWS - 1) / ROWS;
    }

    /**
     * Sharing of every segment (their lengths, in floats {@code n}, checked by the contract's checker before); the
     * first {@code outputs} segments must overlap none of the others.
     */
    private static void checkSegments(Parallel pool, int outputs, String[] names, MemorySegment[] segs, long[] n) {
        for (int i = 0; i < segs.length; i++) {
            Check.shared(names[i], segs[i], pool.threads());
        }
        for (int i = 0; i < outputs; i++) {
            for (int j = 0; j < segs.length; j++) {
                if (j != i) {
                    Check.disjoint(names[i], segs[i], n[i] * FB, names[j], segs[j], n[j] * FB);
                }
            }
        }
    }

    /**
     * {@code Σ lanes[j]} for j = 0, 1, …: the lanes of a vector accumulator summed in a fixed order.
     * {@code reduceLanes(ADD)} may add in any order, and does differ between the interpreter, C1 and C2, so a run
     * whose kernels were compiled at other moments would round differently (seen: losses differing after a few steps
     * of the same training run).
     */
    private static float inOrder(float[] lanes) {
        float s = 0f;
        for (float x : lanes) {
            s += x;
        }
        return s;
    }
}
