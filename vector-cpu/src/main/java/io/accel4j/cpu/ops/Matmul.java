package io.accel4j.cpu.ops;

import io.accel4j.core.DType;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * A linear layer with weights stored (out, in), forward and backward, on the GEMM family ({@link Gemm}).
 *
 * <p>Forward {@code out (N,OC) = inp (N,C)·weightᵀ + bias} is one NT GEMM with the bias fused into its epilogue.
 * Backward adds: {@code dinp (N,C) += dout (N,OC)·weight (OC,C)} (NN, beta 1), {@code dweight (OC,C) += doutᵀ·inp}
 * (TN, beta 1) and {@code dbias (OC) += Σ_rows dout} (a column sum). Every piece splits over independent outputs or,
 * for a long reduction such as the LM head's dinp (K = OC = 50304), over fixed chunks of K summed in chunk order
 * ({@link Gemm}), so results do not depend on the thread count.
 */
public final class Matmul {

    private Matmul() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final int L = F.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    /** Columns of dbias one task sums: a multiple of every vector length, small enough to spread OC=768 over threads. */
    private static final int BIAS_COLUMNS = 128;

    /** {@code out (N,OC) = inp (N,C)·weightᵀ (C,OC) + bias (OC)}; {@code bias} may be null. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp, MemorySegment weight,
                               MemorySegment bias, int N, int C, int OC) {
        forward(pool, out, inp, weight, bias, N, C, OC, DType.FP32);
    }

    /**
     * The forward with products of {@code operands} precision (FP32, or BF16/FP16: inp and weight rounded to it while
     * the GEMM packs them, fp32 accumulation; see {@link io.accel4j.core.ops.MatmulOps}).
     */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp, MemorySegment weight,
                               MemorySegment bias, int N, int C, int OC, DType operands) {
        checkSizes(N, C, OC);
        Gemm.gemm(pool, Layout.NT, N, OC, C, 1f, inp, DType.FP32, C, 1f, weight, DType.FP32, C, 1f,
                0f, out, DType.FP32, OC, bias, operands);
    }

    /**
     * {@code dinp (N,C) += dout·weight}, {@code dweight (OC,C) += doutᵀ·inp}, {@code dbias (OC) += Σ_rows dout}
     * ({@code dbias} may be null). The gradients must not overlap each other or the inputs.
     */
    public static void backward(Parallel pool, MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                MemorySegment dout, MemorySegment inp, MemorySegment weight, int N, int C, int OC) {
        backward(pool, dinp, dweight, dbias, dout, inp, weight, N, C, OC, DType.FP32);
    }

    /**
     * The backward with products of {@code operands} precision: dout, weight and inp rounded to it while the GEMMs
     * pack them, fp32 accumulation; dbias sums the fp32 dout as it is (see {@link io.accel4j.core.ops.MatmulOps}).
     */
    public static void backward(Parallel pool, MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                MemorySegment dout, MemorySegment inp, MemorySegment weight, int N, int C, int OC,
                                DType operands) {
        checkSizes(N, C, OC);
        checkBias(pool, dbias, dout, N, OC);
        Gemm.gemm(pool, Layout.NN, N, C, OC, 1f, dout, DType.FP32, OC, 1f, weight, DType.FP32, C, 1f,
                1f, dinp, DType.FP32, C, null, operands);
        Gemm.gemm(pool, Layout.TN, OC, C, N, 1f, dout, DType.FP32, OC, 1f, inp, DType.FP32, C, 1f,
                1f, dweight, DType.FP32, C, null, operands);
        biasBackward(pool, dbias, dout, N, OC);
    }

    /**
     * {@code pre (N,OC) = inp·weightᵀ + bias}, {@code out (N,OC) = gelu(pre)} ({@link io.accel4j.core.ops.MatmulOps#
     * matmulForwardGelu}): the forward's GEMM with GELU in its epilogue ({@link Gemm#gemmGelu}), the bits of
     * {@link #forward} into pre then {@link Gelu#forward}.
     */
    public static void forwardGelu(Parallel pool, MemorySegment out, MemorySegment pre, MemorySegment inp,
                                   MemorySegment weight, MemorySegment bias, int N, int C, int OC, DType operands) {
        checkSizes(N, C, OC);
        Gemm.gemmGelu(pool, Layout.NT, N, OC, C, inp, C, weight, C, out, OC, pre, OC, bias, operands);
    }

    /**
     * The projection backward of {@code inp = gelu(pre)} with the GELU backward fused
     * ({@link io.accel4j.core.ops.MatmulOps#matmulBackwardGelu}): {@code dpre (N,C) = gelu'(pre)·(dout·weight)}
     * (written) with {@code dpreBias (C) += Σ_rows dpre} in the same GEMM's epilogue ({@link Gemm#gemmDgelu}: the bits
     * of {@link #backward}'s dinp into zeros then {@link Gelu#backward} into zeros; dpreBias summed per 5 rows, then
     * those sums in row order), {@code dweight += doutᵀ·inp} and {@code dbias += Σ_rows dout} as {@link #backward}.
     * dpreBias and dbias may be null.
     */
    public static void backwardGelu(Parallel pool, MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                    MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                    MemorySegment weight, int N, int C, int OC, DType operands) {
        checkSizes(N, C, OC);
        checkBias(pool, dbias, dout, N, OC);
        Gemm.gemmDgelu(pool, Layout.NN, N, C, OC, dout, OC, weight, C, dpre, C, pre, C, dpreBias, operands);
        Gemm.gemm(pool, Layout.TN, OC, C, N, 1f, dout, DType.FP32, OC, 1f, inp, DType.FP32, C, 1f,
                1f, dweight, DType.FP32, C, null, operands);
        biasBackward(pool, dbias, dout, N, OC);
    }

    /**
     * {@code dbias (OC) += Σ_rows dout (N,OC)} alone: the bias gradient {@link #backward} adds (for a caller that
     * times the unfused MLP, e.g. the fused GELU matmuls' benchmark).
     */
    public static void biasGradient(Parallel pool, MemorySegment dbias, MemorySegment dout, int N, int OC) {
        checkSizes(N, 1, OC);
        Objects.requireNonNull(dbias, "dbias");
        checkBias(pool, dbias, dout, N, OC);
        biasBackward(pool, dbias, dout, N, OC);
    }

    /** {@link #biasBackward}'s checks, done before any gradient is written; nothing when {@code dbias} is null. */
    static void checkBias(Parallel pool, MemorySegment dbias, MemorySegment dout, int N, int OC) {
        if (dbias != null) {
            Check.floats("dbias", dbias, OC);
            Check.floats("dout", dout, (long) N * OC);
            Check.shared("dbias", dbias, pool.threads());
            Check.shared("dout", dout, pool.threads());
            Check.disjoint("dbias", dbias, (long) OC * Float.BYTES, "dout", dout, (long) N * OC * Float.BYTES);
        }
    }

    /** {@code dbias (OC) += Σ_rows dout (N,OC)}, nothing when {@code dbias} is null; checked by {@link #checkBias}. */
    static void biasBackward(Parallel pool, MemorySegment dbias, MemorySegment dout, int N, int OC) {
        if (dbias != null) {
            int tasks = (OC + BIAS_COLUMNS - 1) / BIAS_COLUMNS;
            pool.forEach(tasks, task -> columnSum(dbias, dout, N, OC, task * BIAS_COLUMNS,
                    Math.min(OC, (task + 1) * BIAS_COLUMNS)));
        }
    }

    /**
     * {@code dbias[c] += Σ_{r<N} dout[r, c]} for c in [c0, c1), rows added one after another into dbias itself: row
     * order, so the same sum whatever the split, and the task's slice of dbias stays in L1 while dout streams by.
     */
    private static void columnSum(MemorySegment dbias, MemorySegment dout, int N, int OC, int c0, int c1) {
        int vectorEnd = Simd.SCALAR ? c0 : c0 + (c1 - c0) / L * L;
        for (int r = 0; r < N; r++) {
            long row = (long) r * OC;
            for (int c = c0; c < vectorEnd; c += L) {
                FloatVector.fromMemorySegment(F, dbias, (long) c * 4, LE)
                        .add(FloatVector.fromMemorySegment(F, dout, (row + c) * 4, LE))
                        .intoMemorySegment(dbias, (long) c * 4, LE);
            }
            for (int c = vectorEnd; c < c1; c++) {
                dbias.setAtIndex(F32, c, dbias.getAtIndex(F32, c) + dout.getAtIndex(F32, row + c));
            }
        }
    }

    /** {@link MatmulOps#checkSizes}, the contract's. */
    static void checkSizes(int N, int C, int OC) {
        MatmulOps.checkSizes(N, C, OC);
    }
}
