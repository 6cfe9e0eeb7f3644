package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.NR;

import io.accel4j.core.DType;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Writes a finished fp32 accumulator block to C: {@code C[i][j] = alpha·acc[i][j] + beta·C[i][j] + bias[j]}, with C
 * not read when beta is 0 (so it may hold NaN), and the result rounded to nearest-even for a BF16 C.
 */
final class Epilogue {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private Epilogue() {}

    /**
     * @param acc   the block in column panels of NR ({@link GemmDriver}): element (i, j) at
     *              {@code accOff + (j/NR)·panelStride + i·NR + j%NR}
     * @param accOff where the block starts in {@code acc}
     * @param panelStride floats from one column panel to the next (the block's rows rounded up to MR, times NR)
     * @param rows  rows of the block (rows ic… of C)
     * @param cols  columns of the block (columns jc… of C)
     */
    static void store(float[] acc, int accOff, int panelStride, int rows, int cols, float alpha, float beta,
                      MemorySegment c, DType cType, int ldc, int ic, int jc, MemorySegment bias) {
        int vecEnd = (Simd.SCALAR || cType != DType.FP32) ? 0 : S.loopBound(cols);
        for (int i = 0; i < rows; i++) {
            long cRow = (long) (ic + i) * ldc + jc;
            int aRow = accOff + i * NR; // a vector never crosses a panel: V divides NR
            int j = 0;
            for (; j < vecEnd; j += S.length()) {
                FloatVector v = FloatVector.fromArray(S, acc, aRow + (j / NR) * panelStride + j % NR).mul(alpha);
                long off = (cRow + j) * Float.BYTES;
                if (beta != 0f) {
                    v = v.add(FloatVector.fromMemorySegment(S, c, off, ByteOrder.LITTLE_ENDIAN).mul(beta));
                }
                if (bias != null) {
                    v = v.add(FloatVector.fromMemorySegment(S, bias, (long) (jc + j) * Float.BYTES,
                            ByteOrder.LITTLE_ENDIAN));
                }
                v.intoMemorySegment(c, off, ByteOrder.LITTLE_ENDIAN);
            }
            for (; j < cols; j++) {
                float v = alpha * acc[aRow + (j / NR) * panelStride + j % NR];
                if (beta != 0f) {
                    v += beta * cType.getFloat(c, cRow + j);
                }
                if (bias != null) {
                    v += bias.getAtIndex(F32, jc + j);
                }
                cType.setFloat(c, cRow + j, v, false);
            }
        }
    }
}
