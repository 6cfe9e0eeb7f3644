package io.accel4j.cpu.ops;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Causal multi-head self-attention the llm.c way, in fp32: the materialising baseline {@link FlashAttention} is
 * measured against ({@link io.accel4j.core.ops.AttentionOps} has the math and shapes: {@code qkv (B,T,3C)},
 * {@code out (B,T,C)}, {@code lse (B,NH,T)}, {@code hs = C/NH}, {@code scale = 1/√hs}).
 *
 * <p>Per (b, h), one task: the scores {@code att[t][u] = scale·q_t·k_u} of the whole head (T×T floats of
 * scratch per thread), then row by row the max, {@code exp}, sum, {@code lse = max + log Σ}, and
 * {@code out_t = Σ_u att[t][u]/Σ · v_u}. Backward recomputes {@code p = exp(s − lse)} into the same T×T buffer,
 * then per row {@code dp_u = dout_t·v_u}, {@code D = Σ_u p_u·dp_u}, {@code ds_u = scale·p_u·(dp_u − D)},
 * {@code dq_t += Σ_u ds_u·k_u}, {@code dk_u += ds_u·q_t}, {@code dv_u += p_u·dout_t} (dk and dv of the head in
 * scratch, added to dqkv at the end). Dot products and axpys over hs use the Vector API, exp is
 * {@link Softmax#expRow} (the flash kernel's); heads run in parallel and write disjoint outputs, and no reduction
 * uses {@code reduceLanes} or EXP (whose last bits differ between the interpreter and C2), so the result is the
 * same on any number of threads and in every JIT tier.
 */
public final class NaiveAttention {

    private NaiveAttention() {}

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int V = S.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** Scratch bytes {@link #forward} allocates: T×T scores plus a row, per worker thread. */
    public static long workspaceBytes(int B, int T, int C, int NH, int threads) {
        io.accel4j.cpu.Check.positive("threads", threads);
        int hs = AttentionArgs.headSize(B, T, C, NH);
        return AttentionArgs.workers(threads, (long) B * NH) * ((long) T * T + hs + Simd.lanes()) * Float.BYTES;
    }

    /** Scratch bytes {@link #backward} allocates: T×T probabilities, a row, dK and dV of one head, per thread. */
    public static long backwardWorkspaceBytes(int B, int T, int C, int NH, int threads) {
        io.accel4j.cpu.Check.positive("threads", threads);
        int hs = AttentionArgs.headSize(B, T, C, NH);
        return AttentionArgs.workers(threads, (long) B * NH) * ((long) T * T + T + 2L * T * hs + hs + Simd.lanes())
                * Float.BYTES;
    }

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)} from {@code qkv (B,T,3C)}. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                               int B, int T, int C, int NH) {
        forward(pool, out, lse, qkv, B, T, C, NH, float[]::new);
    }

    static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                        int B, int T, int C, int NH, IntFunction<float[]> scratch) {
        int hs = AttentionArgs.headSize(B, T, C, NH);
        AttentionArgs.forward(pool, out, lse, qkv, B, T, C, NH);
        int tt = squareFloats(T);
        int heads = B * NH;
        float scale = (float) (1 / Math.sqrt(hs));
        AtomicInteger next = new AtomicInteger();
        pool.forEach(AttentionArgs.workers(pool.threads(), heads), w -> {
            float[] att = scratch.apply(tt), acc = scratch.apply(hs), lanes = scratch.apply(Simd.lanes());
            for (int item; (item = next.getAndIncrement()) < heads; ) {
                forwardHead(out, lse, qkv, item / NH, item % NH, T, C, NH, hs, scale, att, acc, lanes);
            }
        });
    }

    private static void forwardHead(MemorySegment out, MemorySegment lse, MemorySegment qkv, int b, int h,
                                    int T, int C, int NH, int hs, float scale, float[] att, float[] acc,
                                    float[] lanes) {
        long row = 3L * C * Float.BYTES;
        long q0 = ((long) b * T * 3 * C + (long) h * hs) * Float.BYTES;
        long k0 = q0 + (long) C * Float.BYTES, v0 = q0 + 2L * C * Float.BYTES;
        for (int t = 0; t < T; t++) {
            int a = t * T;
            float max = Float.NEGATIVE_INFINITY;
            for (int u = 0; u <= t; u++) {
                float s = scale * dot(qkv, q0 + t * row, qkv, k0 + u * row, hs, lanes);
                att[a + u] = s;
                max = Math.max(max, s);
            }
            float sum = Softmax.expRow(att, a, t + 1, max, lanes);
            float inv = 1f / sum;
            Arrays.fill(acc, 0f);
            for (int u = 0; u <= t; u++) {
                axpy(acc, 0, att[a + u] * inv, qkv, v0 + u * row, hs);
            }
            MemorySegment.copy(acc, 0, out, F32, ((long) (b * T + t) * C + (long) h * hs) * Float.BYTES, hs);
            lse.set(F32, ((long) (b * NH + h) * T + t) * Float.BYTES, max + (float) Math.log(sum));
        }
    }

    /** {@code dqkv (B,T,3C) +=} the gradient of {@code Σ dout·out}, from the forward's {@code lse}. */
    public static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                                MemorySegment out, MemorySegment lse, int B, int T, int C, int NH) {
        backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, float[]::new);
    }

    static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                         MemorySegment out, MemorySegment lse, int B, int T, int C, int NH,
                         IntFunction<float[]> scratch) {
        int hs = AttentionArgs.headSize(B, T, C, NH);
        AttentionArgs.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
        int tt = squareFloats(T);
        int th = Math.toIntExact((long) T * hs);
        int heads = B * NH;
        float scale = (float) (1 / Math.sqrt(hs));
        AtomicInteger next = new AtomicInteger();
        pool.forEach(AttentionArgs.workers(pool.threads(), heads), w -> {
            float[] att = scratch.apply(tt), dp = scratch.apply(T);
            float[] dk = scratch.apply(th), dv = scratch.apply(th), dq = scratch.apply(hs);
            float[] lanes = scratch.apply(Simd.lanes());
            for (int item; (item = next.getAndIncrement()) < heads; ) {
                backwardHead(dqkv, dout, qkv, lse, item / NH, item % NH, T, C, NH, hs, scale, att, dp, dk, dv, dq,
                        lanes);
            }
        });
    }

    private static void backwardHead(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment lse,
                                     int b, int h, int T, int C, int NH, int hs, float scale,
                                     float[] att, float[] dp, float[] dk, float[] dv, float[] dq,
                                     float[] lanes) {
        long row = 3L * C * Float.BYTES, oRow = (long) C * Float.BYTES;
        long q0 = ((long) b * T * 3 * C + (long) h * hs) * Float.BYTES;
        long k0 = q0 + (long) C * Float.BYTES, v0 = q0 + 2L * C * Float.BYTES;
        long o0 = ((long) b * T * C + (long) h * hs) * Float.BYTES;
        long l0 = (long) (b * NH + h) * T * Float.BYTES;
        for (int t = 0; t < T; t++) { // p = exp(s − lse), the whole head
            int a = t * T;
            for (int u = 0; u <= t; u++) {
                att[a + u] = scale * dot(qkv, q0 + t * row, qkv, k0 + u * row, hs, lanes);
            }
            Softmax.expRow(att, a, t + 1, lse.get(F32, l0 + (long) t * Float.BYTES), lanes);
        }
        Arrays.fill(dk, 0f);
        Arrays.fill(dv, 0f);
        for (int t = 0; t < T; t++) {
            int a = t * T;
            long dOut = o0 + t * oRow;
            for (int u = 0; u <= t; u++) {
                dp[u] = dot(dout, dOut, qkv, v0 + u * row, hs, lanes);
            }
            float d = dotArrays(att, a, dp, t + 1, lanes);
            Arrays.fill(dq, 0f);
            for (int u = 0; u <= t; u++) {
                float p = att[a + u];
                float ds = scale * p * (dp[u] - d);
                axpy(dv, u * hs, p, dout, dOut, hs);
                axpy(dq, 0, ds, qkv, k0 + u * row, hs);
                axpy(dk, u * hs, ds, qkv, q0 + t * row, hs);
            }
            addRow(dqkv, q0 + t * row, dq, 0, hs);
        }
        for (int u = 0; u < T; u++) {
            addRow(dqkv, k0 + u * row, dk, u * hs, hs);
            addRow(dqkv, v0 + u * row, dv, u * hs, hs);
        }
    }

    /** T² as an array length, or an error saying the naive kernel cannot hold the scores. */
    private static int squareFloats(int T) {
        long tt = (long) T * T;
        if (tt > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("T (" + T + ") is too long for the naive kernel's T×T scores "
                    + "(at most 46340); use FlashAttention");
        }
        return (int) tt;
    }

    /**
     * {@code Σ_i x[i]·y[i]} over n floats of two segments, two vector accumulators whose lanes are then summed in
     * order (through {@code lanes}), so the bits are the same in every JIT tier.
     */
    private static float dot(MemorySegment x, long xAt, MemorySegment y, long yAt, int n, float[] lanes) {
        int i = 0;
        float s = 0f;
        if (!Simd.SCALAR && n >= V) {
            FloatVector a0 = FloatVector.zero(S), a1 = FloatVector.zero(S);
            for (; i + 2 * V <= n; i += 2 * V) {
                long xo = xAt + (long) i * Float.BYTES, yo = yAt + (long) i * Float.BYTES;
                a0 = FloatVector.fromMemorySegment(S, x, xo, LE).fma(FloatVector.fromMemorySegment(S, y, yo, LE), a0);
                a1 = FloatVector.fromMemorySegment(S, x, xo + V * Float.BYTES, LE)
                        .fma(FloatVector.fromMemorySegment(S, y, yo + V * Float.BYTES, LE), a1);
            }
            for (; i + V <= n; i += V) {
                a0 = FloatVector.fromMemorySegment(S, x, xAt + (long) i * Float.BYTES, LE)
                        .fma(FloatVector.fromMemorySegment(S, y, yAt + (long) i * Float.BYTES, LE), a0);
            }
            a0.add(a1).intoArray(lanes, 0);
            for (int l = 0; l < V; l++) {
                s += lanes[l];
            }
        }
        for (; i < n; i++) {
            s = Math.fma(x.get(F32, xAt + (long) i * Float.BYTES), y.get(F32, yAt + (long) i * Float.BYTES), s);
        }
        return s;
    }

    /** {@code Σ_i x[xOff + i]·y[i]} over n floats, lanes summed in order. */
    private static float dotArrays(float[] x, int xOff, float[] y, int n, float[] lanes) {
        int i = 0;
        float s = 0f;
        if (!Simd.SCALAR) {
            FloatVector acc = FloatVector.zero(S);
            for (int bound = S.loopBound(n); i < bound; i += V) {
                acc = FloatVector.fromArray(S, x, xOff + i).fma(FloatVector.fromArray(S, y, i), acc);
            }
            acc.intoArray(lanes, 0);
            for (int l = 0; l < V; l++) {
                s += lanes[l];
            }
        }
        for (; i < n; i++) {
            s = Math.fma(x[xOff + i], y[i], s);
        }
        return s;
    }

    /** {@code acc[off + i] += w·x[i]} over n floats of a segment. */
    private static void axpy(float[] acc, int off, float w, MemorySegment x, long xAt, int n) {
        int i = 0;
        if (!Simd.SCALAR) {
            FloatVector wv = FloatVector.broadcast(S, w);
            for (int bound = S.loopBound(n); i < bound; i += V) {
                FloatVector.fromMemorySegment(S, x, xAt + (long) i * Float.BYTES, LE)
                        .fma(wv, FloatVector.fromArray(S, acc, off + i)).intoArray(acc, off + i);
            }
        }
        for (; i < n; i++) {
            acc[off + i] = Math.fma(w, x.get(F32, xAt + (long) i * Float.BYTES), acc[off + i]);
        }
    }

    /** {@code dst[i] += src[off + i]} over n floats of a segment. */
    private static void addRow(MemorySegment dst, long at, float[] src, int off, int n) {
        int i = 0;
        if (!Simd.SCALAR) {
            for (int bound = S.loopBound(n); i < bound; i += V) {
                long o = at + (long) i * Float.BYTES;
                FloatVector.fromMemorySegment(S, dst, o, LE).add(FloatVector.fromArray(S, src, off + i))
                        .intoMemorySegment(dst, o, LE);
            }
        }
        for (; i < n; i++) {
            long o = at + (long) i * Float.BYTES;
            dst.set(F32, o, dst.get(F32, o) + src[off + i]);
        }
    }
}
