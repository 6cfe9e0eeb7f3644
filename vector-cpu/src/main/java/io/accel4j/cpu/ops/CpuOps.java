package io.accel4j.cpu.ops;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.CastOps;
import io.accel4j.core.ops.AttentionOps;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cpu.Casts;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The CPU backend of the kernel contract: each method checks nothing itself and hands its arguments, with this
 * backend's thread pool, to the kernel class of the same name ({@link Encoder}, {@link LayerNorm}, {@link Matmul},
 * {@link FlashAttention} or {@link NaiveAttention}, {@link Gelu}, {@link Residual}, {@link FusedClassifier},
 * {@link AdamW}, {@link Sgd}, {@link Lion}, {@link Reductions}, {@link Casts}; {@link Fp8Matmul} for FP8 linear layers), which check their own
 * arguments. The only state is the FP8 layers' per-thread scratch for the operands' codes.
 */
public final class CpuOps implements Ops {

    /** Which attention kernel {@link #attentionForward}/{@link #attentionBackward} run. */
    public enum AttentionKernel {
        /** Tiled with an online softmax; O(B·NH·T) extra memory. The default. */
        FLASH,
        /** Materialises the T×T scores of one head at a time; the baseline. */
        NAIVE
    }

    /** Elements one task of a bulk cast converts. */
    private static final int CAST_CHUNK = 1 << 16;

    private final Parallel pool;
    private final AttentionKernel attention;
    private final Fp8Matmul fp8Matmul;
    private final PooledMemory memory;

    /** The CPU backend on {@code pool}, with flash attention. */
    public CpuOps(Parallel pool) {
        this(pool, AttentionKernel.FLASH);
    }

    public CpuOps(Parallel pool, AttentionKernel attention) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.attention = Objects.requireNonNull(attention, "attention");
        this.fp8Matmul = new Fp8Matmul(pool, this);
        this.memory = new PooledMemory(pool);
    }

    /** Host memory whose {@code zero} of a mid-sized segment runs on the pool ({@link PooledMemory}). */
    @Override
    public io.accel4j.core.memory.DeviceMemory memory() {
        return memory;
    }

    /** The pool the kernels run on. */
    public Parallel pool() {
        return pool;
    }

    @Override
    public String describe() {
        return "cpu: " + Simd.describe() + ", " + pool.threads() + " thread" + (pool.threads() == 1 ? "" : "s")
                + ", " + attention.name().toLowerCase() + " attention";
    }

    @Override
    public void encoderForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                               int B, int T, int C, int V) {
        Encoder.forward(pool, out, inp, wte, wpe, B, T, C, V);
    }

    @Override
    public void encoderBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                int B, int T, int C, int V) {
        Encoder.backward(pool, dwte, dwpe, dout, inp, B, T, C, V);
    }

    @Override
    public void layernormForward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                                 MemorySegment weight, MemorySegment bias, int N, int C) {
        LayerNorm.forward(pool, out, mean, rstd, inp, weight, bias, N, C);
    }

    @Override
    public void layernormBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                                  int N, int C) {
        LayerNorm.backward(pool, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, DType operands) {
        Matmul.forward(pool, out, inp, weight, bias, N, C, OC, operands);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        Matmul.backward(pool, dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
    }

    @Override
    public void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                                  MemorySegment bias, int N, int C, int OC, DType operands) {
        Matmul.forwardGelu(pool, out, pre, inp, weight, bias, N, C, OC, operands);
    }

    @Override
    public void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                   MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                   MemorySegment weight, int N, int C, int OC, DType operands) {
        Matmul.backwardGelu(pool, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC, operands);
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, Fp8Scaling fp8) {
        fp8Matmul.forward(out, inp, weight, bias, N, C, OC, fp8);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        fp8Matmul.backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fp8);
    }

    /**
     * FP32 on either kernel; BF16 ({@link io.accel4j.core.ops.AttentionOps}' rounding points) on the flash kernel
     * only: the naive one, a baseline, throws {@link UnsupportedOperationException} for it.
     */
    @Override
    public void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv,
                                 int B, int T, int C, int NH, DType operands) {
        if (flash(operands)) {
            FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH, operands);
        } else {
            NaiveAttention.forward(pool, out, lse, qkv, B, T, C, NH);
        }
    }

    @Override
    public void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                  MemorySegment lse, int B, int T, int C, int NH, DType operands) {
        if (flash(operands)) {
            FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, operands);
        } else {
            NaiveAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
        }
    }

    @Override
    public void checkAttention(DType operands, int C, int NH) {
        flash(operands);
    }

    /** Whether attention with {@code operands} runs on the flash kernel (else the naive one, FP32 only). */
    private boolean flash(DType operands) {
        if (AttentionOps.checkOperands(operands) != DType.FP32 && attention == AttentionKernel.NAIVE) {
            throw new UnsupportedOperationException("the naive attention kernel takes FP32 operands only, got "
                    + operands + ": use the flash kernel (the default) for " + operands + " attention");
        }
        return attention == AttentionKernel.FLASH;
    }

    @Override
    public void geluForward(MemorySegment out, MemorySegment inp, long n) {
        Gelu.forward(pool, out, inp, n);
    }

    @Override
    public void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        Gelu.backward(pool, dinp, inp, dout, n);
    }

    @Override
    public void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        Residual.forward(pool, out, inp1, inp2, n);
    }

    @Override
    public void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        Residual.backward(pool, dinp1, dinp2, dout, n);
    }

    @Override
    public double classifierForward(MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                    int N, int V, int Vp) {
        return FusedClassifier.forward(pool, losses, logits, targets, N, V, Vp);
    }

    @Override
    public double classifierForwardBackward(MemorySegment logits, MemorySegment losses, MemorySegment targets,
                                            int N, int V, int Vp, float dlossScale) {
        return FusedClassifier.forwardBackward(pool, logits, losses, targets, N, V, Vp, dlossScale);
    }

    @Override
    public void classifierShardMax(MemorySegment max, MemorySegment logits, int N, int Vv, int Vs) {
        VocabShards.max(pool, max, logits, N, Vv, Vs);
    }

    @Override
    public void classifierShardSums(MemorySegment sums, MemorySegment logits, MemorySegment max,
                                    MemorySegment targets, int N, int V0, int Vv, int Vs) {
        VocabShards.sums(pool, sums, logits, max, targets, N, V0, Vv, Vs);
    }

    @Override
    public double classifierShardLoss(MemorySegment losses, MemorySegment logits, MemorySegment max,
                                      MemorySegment sums, MemorySegment targets, int N, int V0, int Vv, int Vs,
                                      float dlossScale, boolean backward) {
        return VocabShards.loss(pool, losses, logits, max, sums, targets, N, V0, Vv, Vs, dlossScale, backward);
    }

    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      long offset, long length, AdamWConfig config, int step, float gradScale) {
        AdamW.update(pool, params, grads, m, v, offset, length, config, step, gradScale);
    }

    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                          long seed) {
        AdamW.updateBf16(pool, paramsBf16, master, grads, m, v, offset, length, config, step, gradScale, seed);
    }

    @Override
    public void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                    SgdConfig config, int step, float gradScale) {
        Sgd.update(pool, params, grads, buf, offset, length, config, step, gradScale);
    }

    @Override
    public void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                     LionConfig config, float gradScale) {
        Lion.update(pool, params, grads, m, offset, length, config, gradScale);
    }

    @Override
    public double sumOfSquares(MemorySegment x, long n) {
        return Reductions.sumOfSquares(pool, x, n);
    }

    @Override
    public boolean hasNonFinite(MemorySegment x, long n) {
        return Reductions.hasNonFinite(pool, x, n);
    }

    @Override
    public float amax(MemorySegment x, long n) {
        return Reductions.amax(pool, x, n);
    }

    @Override
    public void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        CastOps.checkFromFp32(dst, dstType, src, n);
        checkCast(dst, dstType, src, DType.FP32, n);
        switch (dstType) {
            case FP32 -> chunks(n, (i, len) -> MemorySegment.copy(src, i * 4, dst, i * 4, len * 4));
            case BF16 -> chunks(n, (i, len) -> Casts.f32ToBf16(dst, i, src, i, len));
            case FP16 -> chunks(n, (i, len) -> Casts.f32ToF16(dst, i, src, i, len));
            default -> throw new IllegalArgumentException("castFromFp32 writes FP32, BF16 or FP16, got " + dstType
                    + ": use castToFp8 for FP8 (it takes a scale and returns the amax)");
        }
    }

    @Override
    public float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        CastOps.checkToFp8(dst, fp8Type, src, n, scale);
        checkCast(dst, fp8Type, src, DType.FP32, n);
        float[] amax = new float[Tasks.chunks(n, CAST_CHUNK)];
        Tasks.ranges(pool, n, CAST_CHUNK,
                (t, from, to) -> amax[t] = Casts.f32ToFp8(fp8Type, dst, from, src, from, to - from, scale, true));
        float max = 0;
        for (float a : amax) {
            max = Math.max(max, a);
        }
        return max;
    }

    @Override
    public void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        CastOps.checkToFp32(dst, src, srcType, n, scaleInv);
        checkCast(dst, DType.FP32, src, srcType, n);
        switch (srcType) {
            case FP32 -> chunks(n, (i, len) -> MemorySegment.copy(src, i * 4, dst, i * 4, len * 4));
            case BF16 -> chunks(n, (i, len) -> Casts.bf16ToF32(dst, i, src, i, len));
            case FP16 -> chunks(n, (i, len) -> Casts.f16ToF32(dst, i, src, i, len));
            default -> chunks(n, (i, len) -> Casts.fp8ToF32(srcType, dst, i, src, i, len, scaleInv));
        }
    }

    /** Past the contract's checks ({@link CastOps}): both segments shared with the pool's threads, not aliased. */
    private void checkCast(MemorySegment dst, DType dstType, MemorySegment src, DType srcType, long n) {
        Check.shared("dst", dst, pool.threads());
        Check.shared("src", src, pool.threads());
        Check.disjoint("dst", dst, n * dstType.byteSize(), "src", src, n * srcType.byteSize());
    }

    /** A bulk cast of elements {@code [first, first + length)}. */
    private interface Cast {
        void run(long first, long length);
    }

    /** Runs {@code cast} over [0, n) in chunks of {@link #CAST_CHUNK} elements, spread over the pool. */
    private void chunks(long n, Cast cast) {
        Tasks.ranges(pool, n, CAST_CHUNK, (t, from, to) -> cast.run(from, to - from));
    }
}
