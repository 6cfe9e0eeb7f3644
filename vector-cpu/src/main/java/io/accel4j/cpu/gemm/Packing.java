package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;

import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * Packs blocks of A and B into the panel order the {@link MicroKernel} reads, decoding any input dtype to fp32 on
 * the way (so one fp32 kernel serves BF16, FP16 and FP8 inputs, and the decoding cost is paid once per element
 * and block, not once per multiply).
 *
 * <p>Every pack reads its source in contiguous runs (a row of a row-major matrix), decodes the run into a float
 * buffer, then scatters it into panels. Rows or columns past the matrix edge are zero, so the kernel always
 * computes full tiles.
 * <pre>
 *   A block, rows i0…i0+mc, k p0…p0+kc:  ap[(i/MR)·MR·kc + k·MR + i%MR]     (panels of MR rows, k-major)
 *   B block, cols j0…j0+nc, k 0…K:       bp[(j/NR)·NR·K  + k·NR + j%NR]     (panels of NR columns, k-major)
 * </pre>
 */
final class Packing {

    private Packing() {}

    /** Packs op(A)[i0…i0+mc, p0…p0+kc) into {@code ap}; rows mc…roundUp(mc, MR) are zero. */
    static void packA(boolean transA, MemorySegment a, DType t, int lda, int i0, int mc, int p0, int kc,
                      float[] ap, float[] run) {
        if (!transA) { // A stored M×K: a run is part of a row of op(A), along k
            for (int i = 0; i < mc; i++) {
                decodeRun(a, t, (long) (i0 + i) * lda + p0, run, kc);
                int base = (i / MR) * MR * kc + i % MR;
                for (int k = 0; k < kc; k++) {
                    ap[base + k * MR] = run[k];
                }
            }
        } else { // A stored K×M: a run is part of a column of op(A), along i
            for (int k = 0; k < kc; k++) {
                decodeRun(a, t, (long) (p0 + k) * lda + i0, run, mc);
                for (int i = 0; i < mc; i++) {
                    ap[(i / MR) * MR * kc + k * MR + i % MR] = run[i];
                }
            }
        }
        for (int i = mc; i < roundUp(mc, MR); i++) {
            int base = (i / MR) * MR * kc + i % MR;
            for (int k = 0; k < kc; k++) {
                ap[base + k * MR] = 0f;
            }
        }
    }

    /** Packs op(B)[0…K, j0…j0+nc) into {@code bp}; columns nc…roundUp(nc, NR) are zero. */
    static void packB(boolean transB, MemorySegment b, DType t, int ldb, int K, int j0, int nc,
                      float[] bp, float[] run) {
        int ncPad = roundUp(nc, NR);
        if (!transB) { // B stored K×N: a run is part of a row of op(B), along j
            for (int k = 0; k < K; k++) {
                decodeRun(b, t, (long) k * ldb + j0, run, nc);
                Arrays.fill(run, nc, ncPad, 0f);
                for (int p = 0; p < ncPad; p += NR) {
                    System.arraycopy(run, p, bp, p * K + k * NR, NR);
                }
            }
        } else { // B stored N×K: a run is a column of op(B), along k
            for (int j = 0; j < nc; j++) {
                decodeRun(b, t, (long) (j0 + j) * ldb, run, K);
                int base = (j / NR) * NR * K + j % NR;
                for (int k = 0; k < K; k++) {
                    bp[base + k * NR] = run[k];
                }
            }
            for (int j = nc; j < ncPad; j++) {
                int base = (j / NR) * NR * K + j % NR;
                for (int k = 0; k < K; k++) {
                    bp[base + k * NR] = 0f;
                }
            }
        }
    }

    /** Decodes {@code n} elements of a {@code t} segment starting at element {@code index} into {@code dst[0…n)}. */
    static void decodeRun(MemorySegment src, DType t, long index, float[] dst, int n) {
        switch (t) {
            case FP32 -> MemorySegment.copy(src, ValueLayout.JAVA_FLOAT_UNALIGNED, index * Float.BYTES, dst, 0, n);
            case BF16 -> Casts.bf16ToF32(dst, 0, src, index, n);
            case FP16 -> Casts.f16ToF32(dst, 0, src, index, n);
            case FP8_E4M3, FP8_E5M2 -> Casts.fp8ToF32(t, dst, 0, src, index, n, 1f);
        }
    }

    static int roundUp(int x, int m) {
        return (x + m - 1) / m * m;
    }
}
