package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;

import io.accel4j.core.DType;
import io.accel4j.cpu.GeluMath;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * What a GEMM does with a finished fp32 accumulator block: one of three stores, chosen when the GEMM is called.
 * <pre>
 *   plain:  C[i][j] = alpha·acc[i][j] + beta·C[i][j] + bias[j]    (C not read when beta is 0, so it may hold NaN;
 *                                                                 rounded to nearest-even for a BF16 C)
 *   gelu:   pre[i][j] = acc[i][j] + bias[j];  C[i][j] = gelu(pre[i][j])                      (fp32 C and pre)
 *   dgelu:  C[i][j] = gelu'(pre[i][j])·acc[i][j];  groupSums[i / MR][j] = Σ C[r][j] over the MR rows r of i's group
 * </pre>
 * gelu and gelu' are {@link GeluMath}'s, so the fused stores give the bits of the element-wise GELU kernels applied
 * to the same values (dgelu computes {@code fma(gelu', acc, 0)}, the element-wise backward into zeros). dgelu's
 * group sums are the first step of a bias gradient that does not depend on how the rows were split among tasks:
 * every row block a task hands the epilogue starts at a multiple of MR, so a group of MR rows is always stored by
 * one call, in row order; {@link #addGroupSums} then adds the groups into the bias gradient in group order.
 */
final class Epilogue {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private enum Kind { PLAIN, GELU, DGELU }

    private final Kind kind;
    final float alpha;
    final float beta;
    final MemorySegment c;
    private final DType cType;
    final int ldc;
    final MemorySegment bias;
    private final MemorySegment pre;
    private final int ldpre;
    private final float[] groupSums;
    private final int ldg;

    private Epilogue(Kind kind, float alpha, float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias,
                     MemorySegment pre, int ldpre, float[] groupSums, int ldg) {
        this.kind = kind;
        this.alpha = alpha;
        this.beta = beta;
        this.c = c;
        this.cType = cType;
        this.ldc = ldc;
        this.bias = bias;
        this.pre = pre;
        this.ldpre = ldpre;
        this.groupSums = groupSums;
        this.ldg = ldg;
    }

    /** {@code C = alpha·acc + beta·C + bias} ({@code bias} may be null). */
    static Epilogue plain(float alpha, float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        return new Epilogue(Kind.PLAIN, alpha, beta, c, cType, ldc, bias, null, 0, null, 0);
    }

    /** {@code pre = acc + bias}, {@code C = gelu(pre)}, both fp32 ({@code bias} may be null). */
    static Epilogue gelu(MemorySegment c, int ldc, MemorySegment pre, int ldpre, MemorySegment bias) {
        return new Epilogue(Kind.GELU, 1f, 0f, c, DType.FP32, ldc, bias, pre, ldpre, null, 0);
    }

    /**
     * {@code C = gelu'(pre)·acc} (fp32), and, when {@code groupSums} is not null, the column sums of each group of MR
     * rows of C in {@code groupSums[(i / MR)·ldg + j]}.
     */
    static Epilogue dgelu(MemorySegment c, int ldc, MemorySegment pre, int ldpre, float[] groupSums, int ldg) {
        return new Epilogue(Kind.DGELU, 1f, 0f, c, DType.FP32, ldc, null, pre, ldpre, groupSums, ldg);
    }

    /**
     * Whether a full tile may be written straight into C by {@link MicroKernel#tileInto}: the plain store into an fp32
     * C, vector mode. (GELU's, dGELU's and a BF16 C's stores take the accumulator's route.)
     */
    boolean direct() {
        return kind == Kind.PLAIN && cType == DType.FP32 && !Simd.SCALAR;
    }

    /**
     * Stores a block.
     *
     * @param acc   the block in column panels of NR ({@link GemmDriver}): element (i, j) at
     *              {@code accOff + (j/NR)·panelStride + i·NR + j%NR}
     * @param accOff where the block starts in {@code acc}
     * @param panelStride floats from one column panel to the next (the block's rows rounded up to MR, times NR)
     * @param rows  rows of the block (rows ic… of C); ic is a multiple of MR
     * @param cols  columns of the block (columns jc… of C)
     */
    void store(float[] acc, int accOff, int panelStride, int rows, int cols, int ic, int jc) {
        switch (kind) {
            case PLAIN -> storePlain(acc, accOff, panelStride, rows, cols, ic, jc);
            case GELU -> storeGelu(acc, accOff, panelStride, rows, cols, ic, jc);
            case DGELU -> storeDgelu(acc, accOff, panelStride, rows, cols, ic, jc);
        }
    }

    private void storePlain(float[] acc, int accOff, int panelStride, int rows, int cols, int ic, int jc) {
        int vecEnd = (Simd.SCALAR || cType != DType.FP32) ? 0 : S.loopBound(cols);
        for (int i = 0; i < rows; i++) {
            long cRow = (long) (ic + i) * ldc + jc;
            int aRow = accOff + i * NR; // a vector never crosses a panel: V divides NR
            int j = 0;
            for (; j < vecEnd; j += S.length()) {
                FloatVector v = FloatVector.fromArray(S, acc, aRow + (j / NR) * panelStride + j % NR).mul(alpha);
                long off = (cRow + j) * Float.BYTES;
                if (beta != 0f) {
                    v = v.add(FloatVector.fromMemorySegment(S, c, off, LE).mul(beta));
                }
                if (bias != null) {
                    v = v.add(FloatVector.fromMemorySegment(S, bias, (long) (jc + j) * Float.BYTES, LE));
                }
                v.intoMemorySegment(c, off, LE);
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

    private void storeGelu(float[] acc, int accOff, int panelStride, int rows, int cols, int ic, int jc) {
        int vecEnd = Simd.SCALAR ? 0 : S.loopBound(cols);
        for (int i = 0; i < rows; i++) {
            long cRow = (long) (ic + i) * ldc + jc;
            long pRow = (long) (ic + i) * ldpre + jc;
            int aRow = accOff + i * NR;
            int j = 0;
            for (; j < vecEnd; j += S.length()) {
                FloatVector v = FloatVector.fromArray(S, acc, aRow + (j / NR) * panelStride + j % NR);
                if (bias != null) {
                    v = v.add(FloatVector.fromMemorySegment(S, bias, (long) (jc + j) * Float.BYTES, LE));
                }
                v.intoMemorySegment(pre, (pRow + j) * Float.BYTES, LE);
                GeluMath.gelu(v).intoMemorySegment(c, (cRow + j) * Float.BYTES, LE);
            }
            for (; j < cols; j++) {
                float v = acc[aRow + (j / NR) * panelStride + j % NR];
                if (bias != null) {
                    v += bias.getAtIndex(F32, jc + j);
                }
                pre.setAtIndex(F32, pRow + j, v);
                c.setAtIndex(F32, cRow + j, GeluMath.gelu(v));
            }
        }
    }

    private void storeDgelu(float[] acc, int accOff, int panelStride, int rows, int cols, int ic, int jc) {
        int vecEnd = Simd.SCALAR ? 0 : S.loopBound(cols);
        FloatVector zero = FloatVector.zero(S);
        for (int i = 0; i < rows; i++) {
            long cRow = (long) (ic + i) * ldc + jc;
            long pRow = (long) (ic + i) * ldpre + jc;
            int aRow = accOff + i * NR;
            boolean sums = groupSums != null;
            boolean first = (ic + i) % MR == 0; // the first row of a group (blocks start on a group)
            int g = ((ic + i) / MR) * ldg + jc;
            int j = 0;
            for (; j < vecEnd; j += S.length()) {
                FloatVector grad = GeluMath.grad(FloatVector.fromMemorySegment(S, pre, (pRow + j) * Float.BYTES, LE));
                FloatVector d = grad.fma(FloatVector.fromArray(S, acc, aRow + (j / NR) * panelStride + j % NR), zero);
                d.intoMemorySegment(c, (cRow + j) * Float.BYTES, LE);
                if (sums) {
                    (first ? d : d.add(FloatVector.fromArray(S, groupSums, g + j))).intoArray(groupSums, g + j);
                }
            }
            for (; j < cols; j++) {
                float d = Math.fma(GeluMath.grad(pre.getAtIndex(F32, pRow + j)),
                        acc[aRow + (j / NR) * panelStride + j % NR], 0f);
                c.setAtIndex(F32, cRow + j, d);
                if (sums) {
                    groupSums[g + j] = first ? d : groupSums[g + j] + d;
                }
            }
        }
    }

    /**
     * {@code dbias[j] += Σ_g groupSums[g·ldg + j]} for j in [j0, j1), the groups g of M rows added one after another
     * into dbias, in group order.
     */
    static void addGroupSums(float[] groupSums, int ldg, int M, MemorySegment dbias, int j0, int j1) {
        int groups = (M + MR - 1) / MR;
        int vecEnd = Simd.SCALAR ? j0 : j0 + S.loopBound(j1 - j0);
        for (int g = 0; g < groups; g++) {
            int row = g * ldg;
            int j = j0;
            for (; j < vecEnd; j += S.length()) {
                long off = (long) j * Float.BYTES;
                FloatVector.fromMemorySegment(S, dbias, off, LE).add(FloatVector.fromArray(S, groupSums, row + j))
                        .intoMemorySegment(dbias, off, LE);
            }
            for (; j < j1; j++) {
                dbias.setAtIndex(F32, j, dbias.getAtIndex(F32, j) + groupSums[row + j]);
            }
        }
    }
}
