package io.accel4j.cpu.gemm;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The GEMM family: {@code C (M×N) = alpha·scaleA·scaleB·op(A)·op(B) + beta·C + bias}, fp32 accumulation.
 *
 * <p>Every input type is decoded exactly to fp32 while it is packed, and one fp32 register-blocked kernel does the
 * multiply-adds (see {@link GemmDriver} for the blocking, {@link MicroKernel} for the kernel). FP8 operands carry
 * per-tensor scales: the result is {@code alpha·scaleA·scaleB·Σ a·b}, the CPU reference for the GPU FP8 path.
 * Arguments are checked once at the entry ({@link IllegalArgumentException} for sizes, leading dimensions, short
 * segments and an output that overlaps an input; {@link IllegalStateException} for freed memory).
 */
public final class Gemm {

    private Gemm() {}

    /** fp32 GEMM on the common pool: {@code C = alpha·op(A)·op(B) + beta·C (+ bias)}. */
    public static void sgemm(Layout layout, int M, int N, int K,
                             float alpha, MemorySegment a, int lda,
                             MemorySegment b, int ldb,
                             float beta, MemorySegment c, int ldc, MemorySegment bias) {
        gemm(Parallel.common(), layout, M, N, K, alpha, a, DType.FP32, lda, 1f, b, DType.FP32, ldb, 1f,
                beta, c, DType.FP32, ldc, bias);
    }

    /**
     * The general GEMM.
     *
     * @param pool   threads to run on
     * @param layout which of A, B are stored transposed
     * @param M      rows of op(A) and C
     * @param N      columns of op(B) and C
     * @param K      the reduction length
     * @param alpha  multiplies the product
     * @param a      A stored row-major, {@code layout.storedRowsA(M,K)} rows of {@code lda} elements
     * @param aType  FP32, BF16, FP16, FP8_E4M3 or FP8_E5M2
     * @param lda    leading dimension of A (≥ {@code layout.storedColsA(M,K)})
     * @param scaleA per-tensor scale of A (1 unless A is a scaled fp8 tensor)
     * @param b      B stored row-major, {@code layout.storedRowsB(K,N)} rows of {@code ldb} elements
     * @param bType  as aType
     * @param ldb    leading dimension of B
     * @param scaleB per-tensor scale of B
     * @param beta   multiplies C's old value; when 0, C is not read (it may hold NaN)
     * @param c      C, M rows of {@code ldc} elements, FP32 or BF16; must not overlap A, B or bias. On a pool of
     *               more than one thread every segment must be readable by every thread (not confined)
     * @param cType  FP32 or BF16 (rounded to nearest even)
     * @param ldc    leading dimension of C (≥ N)
     * @param bias   N fp32 values added to every row of C, or {@code null}
     */
    public static void gemm(Parallel pool, Layout layout, int M, int N, int K,
                            float alpha, MemorySegment a, DType aType, int lda, float scaleA,
                            MemorySegment b, DType bType, int ldb, float scaleB,
                            float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        gemm(pool, layout, M, N, K, alpha, a, aType, lda, scaleA, b, bType, ldb, scaleB, beta, c, cType, ldc, bias,
                DType.FP32);
    }

    /**
     * {@link #gemm(Parallel, Layout, int, int, int, float, MemorySegment, DType, int, float, MemorySegment, DType, int,
     * float, float, MemorySegment, DType, int, MemorySegment) The general GEMM} with products of {@code operands}
     * precision: FP32 as that method; BF16 or FP16: every decoded element of op(A) and op(B) is rounded to nearest-even
     * in that format (fp16 overflowing to ±inf) while it is packed, then the fp32 kernel multiplies and accumulates
     * in fp32 (alpha, beta, C and bias stay fp32). The inputs are not modified.
     */
    public static void gemm(Parallel pool, Layout layout, int M, int N, int K,
                            float alpha, MemorySegment a, DType aType, int lda, float scaleA,
                            MemorySegment b, DType bType, int ldb, float scaleB,
                            float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias, DType operands) {
        Objects.requireNonNull(pool, "pool");
        GemmArgs.check(pool.threads(), layout, M, N, K, a, aType, lda, b, bType, ldb, c, cType, ldc, bias);
        GemmArgs.checkOperands(operands);
        GemmDriver.gemm(pool, layout, M, N, K, a, aType, lda, b, bType, ldb,
                Epilogue.plain(alpha * scaleA * scaleB, beta, c, cType, ldc, bias), operands);
    }

    /**
     * The GEMM with GELU fused into its epilogue, fp32 A, B, C and pre: {@code pre (M×N) = op(A)·op(B) + bias} and
     * {@code C (M×N) = gelu(pre)}, both written (neither read, so they may hold NaN), gelu exactly as
     * {@link io.accel4j.cpu.GeluMath}. Products of {@code operands} precision as {@link #gemm(Parallel, Layout, int,
     * int, int, float, MemorySegment, DType, int, float, MemorySegment, DType, int, float, float, MemorySegment, DType,
     * int, MemorySegment, DType) gemm}; {@code bias} (N fp32, may be null), pre and C stay fp32. C and pre must not
     * overlap each other, A, B or bias.
     */
    public static void gemmGelu(Parallel pool, Layout layout, int M, int N, int K, MemorySegment a, int lda,
                                MemorySegment b, int ldb, MemorySegment c, int ldc, MemorySegment pre, int ldpre,
                                MemorySegment bias, DType operands) {
        Objects.requireNonNull(pool, "pool");
        GemmArgs.check(pool.threads(), layout, M, N, K, a, DType.FP32, lda, b, DType.FP32, ldb, c, DType.FP32, ldc,
                bias);
        GemmArgs.checkOperands(operands);
        GemmArgs.checkPre(pool.threads(), true, layout, M, N, K, a, lda, b, ldb, c, ldc, pre, ldpre, bias);
        GemmDriver.gemm(pool, layout, M, N, K, a, DType.FP32, lda, b, DType.FP32, ldb,
                Epilogue.gelu(c, ldc, pre, ldpre, bias), operands);
    }

    /**
     * The GEMM with the GELU backward fused into its epilogue, fp32 A, B, C and pre: {@code C (M×N) =
     * gelu'(pre)·(op(A)·op(B))}, written (C is not read, so it may hold NaN; {@code fma(gelu', product, 0)}, the bits
     * of the element-wise GELU backward into zeros), and, when {@code biasGrad} is not null,
     * {@code biasGrad (N) += Σ_rows C}: the column sums of every 5 rows (the micro-kernel's MR), each in row order,
     * added into biasGrad in row order — the same bits for any number of threads, but not those of one plain row-order
     * sum. Products of {@code operands} precision as {@link #gemmGelu}. C must not overlap A, B, pre or biasGrad;
     * biasGrad not A, B or pre.
     */
    public static void gemmDgelu(Parallel pool, Layout layout, int M, int N, int K, MemorySegment a, int lda,
                                 MemorySegment b, int ldb, MemorySegment c, int ldc, MemorySegment pre, int ldpre,
                                 MemorySegment biasGrad, DType operands) {
        Objects.requireNonNull(pool, "pool");
        GemmArgs.check(pool.threads(), layout, M, N, K, a, DType.FP32, lda, b, DType.FP32, ldb, c, DType.FP32, ldc,
                null);
        GemmArgs.checkOperands(operands);
        GemmArgs.checkPre(pool.threads(), false, layout, M, N, K, a, lda, b, ldb, c, ldc, pre, ldpre, biasGrad);
        GemmDriver.gemmDgelu(pool, layout, M, N, K, a, lda, b, ldb, c, ldc, pre, ldpre, biasGrad, operands);
    }
}
