package io.accel4j.cpu.ref;

import io.accel4j.core.DType;
import io.accel4j.cpu.gemm.Layout;
import java.lang.foreign.MemorySegment;

/**
 * The plain-Java reference GEMM: the triple loop, obviously correct, no blocking, no threads.
 *
 * <p>{@code C (M×N) = alpha·scaleA·scaleB·op(A)·op(B) + beta·C + bias}, with the same argument contract as
 * {@link io.accel4j.cpu.gemm.Gemm#gemm}. Elements are decoded exactly to fp32, products summed in fp32 in order
 * k = 0…K−1 ({@link #gemm}) or in float64 ({@link #gemmF64}, the ground truth the tests measure both against).
 */
public final class GemmRef {

    private GemmRef() {}

    /** The naive fp32-accumulating loop; writes C in {@code cType} (FP32 or BF16). */
    public static void gemm(Layout layout, int M, int N, int K,
                            float alpha, MemorySegment a, DType aType, int lda, float scaleA,
                            MemorySegment b, DType bType, int ldb, float scaleB,
                            float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        float ab = alpha * scaleA * scaleB;
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                float sum = 0f;
                for (int k = 0; k < K; k++) {
                    sum += elemA(layout, a, aType, lda, i, k) * elemB(layout, b, bType, ldb, k, j);
                }
                float v = ab * sum;
                if (beta != 0f) {
                    v += beta * cType.getFloat(c, (long) i * ldc + j);
                }
                if (bias != null) {
                    v += bias.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, j);
                }
                cType.setFloat(c, (long) i * ldc + j, v, false);
            }
        }
    }

    /**
     * The same product in float64, returned as an M×N row-major array: {@code alpha·scaleA·scaleB·Σ a·b
     * + beta·C + bias}, every operand decoded exactly and every sum exact to float64 rounding.
     */
    public static double[] gemmF64(Layout layout, int M, int N, int K,
                                   double alpha, MemorySegment a, DType aType, int lda, double scaleA,
                                   MemorySegment b, DType bType, int ldb, double scaleB,
                                   double beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        double[] out = new double[M * N];
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double sum = 0;
                for (int k = 0; k < K; k++) {
                    sum += (double) elemA(layout, a, aType, lda, i, k) * elemB(layout, b, bType, ldb, k, j);
                }
                double v = alpha * scaleA * scaleB * sum;
                if (beta != 0) {
                    v += beta * cType.getFloat(c, (long) i * ldc + j);
                }
                if (bias != null) {
                    v += bias.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, j);
                }
                out[i * N + j] = v;
            }
        }
        return out;
    }

    /** op(A)[i][k]. */
    static float elemA(Layout layout, MemorySegment a, DType t, int lda, int i, int k) {
        return t.getFloat(a, layout.transA() ? (long) k * lda + i : (long) i * lda + k);
    }

    /** op(B)[k][j]. */
    static float elemB(Layout layout, MemorySegment b, DType t, int ldb, int k, int j) {
        return t.getFloat(b, layout.transB() ? (long) j * ldb + k : (long) k * ldb + j);
    }
}
