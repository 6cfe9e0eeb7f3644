package io.accel4j.train.profile;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.core.ops.SgdConfig;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A timing decorator of the kernel contract: every {@link Ops} method is passed to the delegate unchanged, and its
 * calls and wall time ({@link System#nanoTime}) are added up under the method's name, with the work it did where
 * that is cheap to count — floating-point operations for the matmuls and attention, bytes of minimal memory traffic
 * (each operand read or written once, fp32 = 4 bytes) for the memory-bound ops. So any model code that takes an
 * {@code Ops} (e.g. {@code Gpt2}) is profiled without changes, like torch.profiler's key averages.
 *
 * <p>Conventions: a matmul forward is {@code 2·N·C·OC} flops, its backward {@code 4·N·C·OC} (dinp and dweight);
 * the MLP's fused GELU matmuls ({@code matmulForwardGelu}, {@code matmulBackwardGelu}) count the same, under their
 * own names, so the GELU's time shows inside them;
 * causal attention forward is {@code 4·B·T²·C / 2} flops and backward 2.5× that (FlashAttention's benchmark
 * convention: the causal mask halves the work, backward does five matmuls to forward's two).
 *
 * <p>Times are right only for a backend whose calls return when the work is done (the CPU backend); an asynchronous
 * one (CUDA) would need a synchronise per call. Not thread-safe: one model on one thread, like {@code Gpt2}.
 */
public final class ProfilingOps implements Ops {

    private static final double F = Float.BYTES;
    /** The suffix of the fused GELU matmuls' names, which {@link #phaseOf} looks through. */
    private static final String FUSED_GELU = "Gelu";

    /** The totals of one op. */
    public record Entry(String op, long calls, long nanos, double flops, double bytes) {

        /** Forward, backward, optimizer or other, from the op's name. */
        public String phase() {
            return phaseOf(op);
        }
    }

    private static final class Stat {
        long calls;
        long nanos;
        double flops;
        double bytes;
    }

    private final Ops delegate;
    private final Map<String, Stat> stats = new LinkedHashMap<>();

    /** Profiles every call to {@code delegate}. */
    public ProfilingOps(Ops delegate) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
    }

    /** The profiled backend. */
    public Ops delegate() {
        return delegate;
    }

    /** Forgets every count (e.g. after warm-up steps). */
    public void reset() {
        stats.clear();
    }

    /** The totals so far, most time first (ties by name). */
    public List<Entry> entries() {
        List<Entry> list = new ArrayList<>();
        stats.forEach((op, s) -> list.add(new Entry(op, s.calls, s.nanos, s.flops, s.bytes)));
        list.sort(Comparator.comparingLong(Entry::nanos).reversed().thenComparing(Entry::op));
        return list;
    }

    /** The sum of the time of every op so far. */
    public long totalNanos() {
        return stats.values().stream().mapToLong(s -> s.nanos).sum();
    }

    /**
     * {@code forward} for names ending in Forward, {@code backward} in Backward (a fused op's suffix, as in
     * {@code matmulForwardGelu}, is ignored), {@code optimizer} for adamw*, sgd and lion.
     */
    public static String phaseOf(String op) {
        if (op.endsWith(FUSED_GELU)) {
            op = op.substring(0, op.length() - FUSED_GELU.length());
        }
        if (op.endsWith("Backward")) {
            return "backward";
        } else if (op.endsWith("Forward")) {
            return "forward";
        } else if (op.startsWith("adamw") || op.equals("sgd") || op.equals("lion")) {
            return "optimizer";
        }
        return "other";
    }

    private void record(String op, long start, double flops, double bytes) {
        long t = System.nanoTime() - start;
        Stat s = stats.computeIfAbsent(op, k -> new Stat());
        s.calls++;
        s.nanos += t;
        s.flops += flops;
        s.bytes += bytes;
    }

    private static double size(DType t) {
        return t == null ? 0 : t.byteSize();
    }

    @Override
    public String describe() {
        long t0 = System.nanoTime();
        String d = delegate.describe();
        record("describe", t0, 0, 0);
        return d;
    }

    @Override
    public DeviceMemory memory() {
        long t0 = System.nanoTime();
        DeviceMemory m = delegate.memory();
        record("memory", t0, 0, 0);
        return m;
    }

    @Override
    public void encoderForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                               int B, int T, int C, int V) {
        long t0 = System.nanoTime();
        delegate.encoderForward(out, inp, wte, wpe, B, T, C, V);
        double btc = (double) B * T * C;
        record("encoderForward", t0, 0, F * (2 * btc + (double) T * C) + 4.0 * B * T);
    }

    @Override
    public void encoderBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                int B, int T, int C, int V) {
        long t0 = System.nanoTime();
        delegate.encoderBackward(dwte, dwpe, dout, inp, B, T, C, V);
        double btc = (double) B * T * C;
        record("encoderBackward", t0, 0, F * (3 * btc + 2.0 * T * C) + 4.0 * B * T);
    }

    @Override
    public void layernormForward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                                 MemorySegment weight, MemorySegment bias, int N, int C) {
        long t0 = System.nanoTime();
        delegate.layernormForward(out, mean, rstd, inp, weight, bias, N, C);
        record("layernormForward", t0, 0, F * (2.0 * N * C + 2.0 * C + 2.0 * N));
    }

    @Override
    public void layernormBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                                  int N, int C) {
        long t0 = System.nanoTime();
        delegate.layernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
        record("layernormBackward", t0, 0, F * (4.0 * N * C + 5.0 * C + 2.0 * N));
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC) {
        long t0 = System.nanoTime();
        delegate.matmulForward(out, inp, weight, bias, N, C, OC);
        record("matmulForward", t0, 2.0 * N * C * OC, 0);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC) {
        long t0 = System.nanoTime();
        delegate.matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        record("matmulBackward", t0, 4.0 * N * C * OC, 0);
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, DType operands) {
        long t0 = System.nanoTime();
        delegate.matmulForward(out, inp, weight, bias, N, C, OC, operands);
        record("matmulForward", t0, 2.0 * N * C * OC, 0);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        long t0 = System.nanoTime();
        delegate.matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        record("matmulBackward", t0, 4.0 * N * C * OC, 0);
    }

    @Override
    public void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                                  MemorySegment bias, int N, int C, int OC, DType operands) {
        long t0 = System.nanoTime();
        delegate.matmulForwardGelu(out, pre, inp, weight, bias, N, C, OC, operands);
        record("matmulForwardGelu", t0, 2.0 * N * C * OC, 0);
    }

    @Override
    public void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                   MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                   MemorySegment weight, int N, int C, int OC, DType operands) {
        long t0 = System.nanoTime();
        delegate.matmulBackwardGelu(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC, operands);
        record("matmulBackwardGelu", t0, 4.0 * N * C * OC, 0);
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, Fp8Scaling fp8) {
        long t0 = System.nanoTime();
        delegate.matmulForward(out, inp, weight, bias, N, C, OC, fp8);
        record("matmulForward", t0, 2.0 * N * C * OC, 0);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        long t0 = System.nanoTime();
        delegate.matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fp8);
        record("matmulBackward", t0, 4.0 * N * C * OC, 0);
    }

    @Override
    public void flushAmaxes() {
        long t0 = System.nanoTime();
        delegate.flushAmaxes();
        record("flushAmaxes", t0, 0, 0);
    }

    @Override
    public void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C,
                                 int NH) {
        long t0 = System.nanoTime();
        delegate.attentionForward(out, lse, qkv, B, T, C, NH);
        record("attentionForward", t0, attentionFlops(B, T, C), 0);
    }

    @Override
    public void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                  MemorySegment lse, int B, int T, int C, int NH) {
        long t0 = System.nanoTime();
        delegate.attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        record("attentionBackward", t0, 2.5 * attentionFlops(B, T, C), 0);
    }

    @Override
    public void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C,
                                 int NH, DType operands) {
        long t0 = System.nanoTime();
        delegate.attentionForward(out, lse, qkv, B, T, C, NH, operands);
        record("attentionForward", t0, attentionFlops(B, T, C), 0);
    }

    @Override
    public void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                  MemorySegment lse, int B, int T, int C, int NH, DType operands) {
        long t0 = System.nanoTime();
        delegate.attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH, operands);
        record("attentionBackward", t0, 2.5 * attentionFlops(B, T, C), 0);
    }

    @Override
    public void checkAttention(DType operands, int C, int NH) {
        long t0 = System.nanoTime();
        delegate.checkAttention(operands, C, NH);
        record("checkAttention", t0, 0, 0);
    }

    /** FlashAttention's count of a causal forward: 4·B·T²·C, halved by the mask. */
    static double attentionFlops(int B, int T, int C) {
        return 4.0 * B * T * T * C / 2;
    }

    @Override
    public void geluForward(MemorySegment out, MemorySegment inp, long n) {
        long t0 = System.nanoTime();
        delegate.geluForward(out, inp, n);
        record("geluForward", t0, 0, F * 2 * n);
    }

    @Override
    public void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        long t0 = System.nanoTime();
        delegate.geluBackward(dinp, inp, dout, n);
        record("geluBackward", t0, 0, F * 4 * n);
    }

    @Override
    public void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        long t0 = System.nanoTime();
        delegate.residualForward(out, inp1, inp2, n);
        record("residualForward", t0, 0, F * 3 * n);
    }

    @Override
    public void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        long t0 = System.nanoTime();
        delegate.residualBackward(dinp1, dinp2, dout, n);
        record("residualBackward", t0, 0, F * 5 * n);
    }

    @Override
    public double classifierForward(MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                    int N, int V, int Vp) {
        long t0 = System.nanoTime();
        double loss = delegate.classifierForward(losses, logits, targets, N, V, Vp);
        record("classifierForward", t0, 0, F * ((double) N * V + 2.0 * N));
        return loss;
    }

    @Override
    public double classifierForwardBackward(MemorySegment logits, MemorySegment losses, MemorySegment targets,
                                            int N, int V, int Vp, float dlossScale) {
        long t0 = System.nanoTime();
        double loss = delegate.classifierForwardBackward(logits, losses, targets, N, V, Vp, dlossScale);
        record("classifierForwardBackward", t0, 0, F * ((double) N * V + (double) N * Vp + 2.0 * N));
        return loss;
    }

    @Override
    public void encoderForwardShard(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                                    int B, int T, int C, int vFrom, int vCount) {
        long t0 = System.nanoTime();
        delegate.encoderForwardShard(out, inp, wte, wpe, B, T, C, vFrom, vCount);
        record("encoderForwardShard", t0, 0, F * (3.0 * B * T * C + (double) B * T));
    }

    @Override
    public void encoderBackwardShard(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                     int B, int T, int C, int vFrom, int vCount) {
        long t0 = System.nanoTime();
        delegate.encoderBackwardShard(dwte, dwpe, dout, inp, B, T, C, vFrom, vCount);
        record("encoderBackwardShard", t0, 0, F * (5.0 * B * T * C + (double) B * T));
    }

    @Override
    public void classifierShardMax(MemorySegment max, MemorySegment logits, int N, int Vv, int Vs) {
        long t0 = System.nanoTime();
        delegate.classifierShardMax(max, logits, N, Vv, Vs);
        record("classifierShardMax", t0, 0, F * ((double) N * Vv + N));
    }

    @Override
    public void classifierShardSums(MemorySegment sums, MemorySegment logits, MemorySegment max,
                                    MemorySegment targets, int N, int V0, int Vv, int Vs) {
        long t0 = System.nanoTime();
        delegate.classifierShardSums(sums, logits, max, targets, N, V0, Vv, Vs);
        record("classifierShardSums", t0, 0, F * ((double) N * Vv + 4.0 * N));
    }

    @Override
    public double classifierShardLoss(MemorySegment losses, MemorySegment logits, MemorySegment max,
                                      MemorySegment sums, MemorySegment targets, int N, int V0, int Vv, int Vs,
                                      float dlossScale, boolean backward) {
        long t0 = System.nanoTime();
        double loss = delegate.classifierShardLoss(losses, logits, max, sums, targets, N, V0, Vv, Vs, dlossScale,
                backward);
        record("classifierShardLoss", t0, 0, F * ((backward ? 2.0 * N * Vs : 0) + 5.0 * N));
        return loss;
    }

    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      long offset, long length, AdamWConfig config, int step, float gradScale) {
        long t0 = System.nanoTime();
        delegate.adamw(params, grads, m, v, offset, length, config, step, gradScale);
        record("adamw", t0, 0, F * 7 * length);
    }

    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                          long seed) {
        long t0 = System.nanoTime();
        delegate.adamwBf16(paramsBf16, master, grads, m, v, offset, length, config, step, gradScale, seed);
        record("adamwBf16", t0, 0, (F * 7 + 2) * length);
    }

    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale) {
        long t0 = System.nanoTime();
        delegate.adamw(params, grads, m, v, ranges, config, step, gradScale);
        record("adamw", t0, 0, F * 7 * elements(ranges));
    }

    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale,
                          long seed) {
        long t0 = System.nanoTime();
        delegate.adamwBf16(paramsBf16, master, grads, m, v, ranges, config, step, gradScale, seed);
        record("adamwBf16", t0, 0, (F * 7 + 2) * elements(ranges));
    }

    @Override
    public void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                    SgdConfig config, int step, float gradScale) {
        long t0 = System.nanoTime();
        delegate.sgd(params, grads, buf, offset, length, config, step, gradScale);
        record("sgd", t0, 0, F * 5 * length);
    }

    @Override
    public void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, List<AdamWRange> ranges,
                    SgdConfig config, int step, float gradScale) {
        long t0 = System.nanoTime();
        delegate.sgd(params, grads, buf, ranges, config, step, gradScale);
        record("sgd", t0, 0, F * 5 * elements(ranges));
    }

    @Override
    public void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                     LionConfig config, float gradScale) {
        long t0 = System.nanoTime();
        delegate.lion(params, grads, m, offset, length, config, gradScale);
        record("lion", t0, 0, F * 5 * length);
    }

    @Override
    public void lion(MemorySegment params, MemorySegment grads, MemorySegment m, List<AdamWRange> ranges,
                     LionConfig config, float gradScale) {
        long t0 = System.nanoTime();
        delegate.lion(params, grads, m, ranges, config, gradScale);
        record("lion", t0, 0, F * 5 * elements(ranges));
    }

    private static long elements(List<AdamWRange> ranges) {
        return ranges.stream().mapToLong(AdamWRange::length).sum();
    }

    @Override
    public double sumOfSquares(MemorySegment x, long n) {
        long t0 = System.nanoTime();
        double r = delegate.sumOfSquares(x, n);
        record("sumOfSquares", t0, 0, F * n);
        return r;
    }

    @Override
    public boolean hasNonFinite(MemorySegment x, long n) {
        long t0 = System.nanoTime();
        boolean r = delegate.hasNonFinite(x, n);
        record("hasNonFinite", t0, 0, F * n);
        return r;
    }

    @Override
    public float amax(MemorySegment x, long n) {
        long t0 = System.nanoTime();
        float r = delegate.amax(x, n);
        record("amax", t0, 0, F * n);
        return r;
    }

    @Override
    public void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        long t0 = System.nanoTime();
        delegate.castFromFp32(dst, dstType, src, n);
        record("castFromFp32", t0, 0, (F + size(dstType)) * n);
    }

    @Override
    public float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        long t0 = System.nanoTime();
        float r = delegate.castToFp8(dst, fp8Type, src, n, scale);
        record("castToFp8", t0, 0, (F + 1) * n);
        return r;
    }

    @Override
    public void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        long t0 = System.nanoTime();
        delegate.castToFp32(dst, src, srcType, n, scaleInv);
        record("castToFp32", t0, 0, (F + size(srcType)) * n);
    }
}
