package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;

import io.accel4j.core.Bf16;
import io.accel4j.core.DType;
import io.accel4j.core.Fp16;
import io.accel4j.cpu.Casts;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Packs blocks of A and B into the panel order the {@link MicroKernel} reads, decoding any input dtype to fp32 on
 * the way (so one fp32 kernel serves BF16, FP16 and FP8 inputs, and the decoding cost is paid once per element
 * and block, not once per multiply).
 *
 * <p>With {@code operands} BF16 or FP16 the decoded values are then rounded to that format ({@link #round}), so the
 * fp32 kernel multiplies bf16/fp16 operands with fp32 accumulation, without a rounded copy of the matrices.
 *
 * <p>Every pack reads its source in contiguous runs (part of a row of a row-major matrix), decodes the runs of one
 * panel into a float buffer, then interleaves them into the panel with sequential writes. Plain fp32 values (fp32
 * source and operands) skip the buffer where that is faster: A in both layouts and transposed B are read straight
 * from the segment into their panels. Rows or columns past the matrix edge are zero, so the kernel always
 * computes full tiles.
 * <pre>
 *   A block, rows i0…i0+mc, k p0…p0+kc:  ap[(i/MR)·MR·kc + k·MR + i%MR]     (panels of MR rows, k-major)
 *   B block, cols 0…ncPad, k 0…K:        bp[pc·ncPad + (j/NR)·NR·kc + (k−pc)·NR + j%NR]
 *                                        (K blocks pc of kc ≤ KC rows; in each, panels of NR columns, k-major)
 * </pre>
 */
final class Packing {

    static {
        if (MR != 5) { // packA writes its panels out by hand for five rows
            throw new AssertionError("Packing.packA is written for MicroKernel.MR = 5, not " + MR);
        }
    }

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    /**
     * Rows of a packed B panel that {@link #packB}'s transposing copy fills at a time (256·NR floats, 32 KiB at NR 32:
     * within L1); a whole panel of a 512-deep K block passes it. 64 and 128 were no better on gpt2-fwd, and slower on
     * lm-fwd.
     */
    static final int TRANSPOSE_ROWS = Integer.getInteger("accel4j.gemm.transposerows", 256);

    /**
     * Rows of B that {@link #packBRowsFp32} copies into every panel before the next rows (4 KiB of each panel at
     * NR 32). A row at a time across all panels wrote NR values kc·NR floats apart (64 KiB at 512×32, one cache set
     * for every panel); a whole panel's kc rows at a time read B in short strided pieces, 2 % slower on lm-dinp,
     * whose B streams from memory. 32 against a row at a time, one Zen 4 thread: 256×256×768 +2.3 %, gpt2-dinp
     * +0.8 %, lm-dinp level.
     */
    static final int PACK_B_ROWS = 32;

    private Packing() {}

    /** True when the values are packed as they are stored: fp32 in, fp32 operands (no decoding, no rounding). */
    private static boolean plainFp32(DType t, DType operands) {
        return t == DType.FP32 && operands == DType.FP32;
    }

    /**
     * Packs op(A)[i0…i0+mc, p0…p0+kc) into {@code ap}; rows mc…roundUp(mc, MR) are zero.
     * {@code run} must hold {@code max(MR·kc, mc)} floats.
     */
    static void packA(boolean transA, MemorySegment a, DType t, int lda, int i0, int mc, int p0, int kc,
                      float[] ap, float[] run, DType operands) {
        if (plainFp32(t, operands)) {
            packAFp32(transA, a, lda, i0, mc, p0, kc, ap);
            return;
        }
        if (!transA) { // A stored M×K: decode the MR rows of a panel, then interleave them k by k
            for (int i = 0; i < mc; i += MR) {
                int rows = Math.min(MR, mc - i);
                for (int r = 0; r < rows; r++) {
                    decodeRun(a, t, (long) (i0 + i + r) * lda + p0, run, r * kc, kc, operands);
                }
                Arrays.fill(run, rows * kc, MR * kc, 0f);
                // Written out for MR = 5: C2 runs this 3× faster than a nested loop over r.
                for (int k = 0, o = i * kc; k < kc; k++, o += MR) { // panel i / MR starts at i·kc
                    ap[o] = run[k];
                    ap[o + 1] = run[kc + k];
                    ap[o + 2] = run[2 * kc + k];
                    ap[o + 3] = run[3 * kc + k];
                    ap[o + 4] = run[4 * kc + k];
                }
            }
        } else { // A stored K×M: a run is part of a column of op(A), along i
            int mcPad = roundUp(mc, MR);
            for (int k = 0; k < kc; k++) {
                decodeRun(a, t, (long) (p0 + k) * lda + i0, run, 0, mc, operands);
                Arrays.fill(run, mc, mcPad, 0f);
                for (int i = 0; i < mcPad; i += MR) { // MR = 5 values to panel i / MR, column k
                    int o = i * kc + k * MR;
                    ap[o] = run[i];
                    ap[o + 1] = run[i + 1];
                    ap[o + 2] = run[i + 2];
                    ap[o + 3] = run[i + 3];
                    ap[o + 4] = run[i + 4];
                }
            }
        }
    }

    /**
     * {@link #packA} for fp32 values taken as they are: reads op(A) straight from the segment, panel by panel, with
     * sequential writes (no run buffer: 0.5–0.6 instead of 0.75–1.6 ns per element, the transposed layout gaining
     * most). Element (i, k) of op(A) lies at {@code base + i·si + k·sk}. A stored K×M with vectors of eight floats or
     * more: {@link #packATransFp32}.
     */
    private static void packAFp32(boolean transA, MemorySegment a, int lda, int i0, int mc, int p0, int kc,
                                  float[] ap) {
        if (transA && EIGHT != null) {
            packATransFp32(a, lda, i0, mc, p0, kc, ap);
            return;
        }
        long si = transA ? 1 : lda;
        long sk = transA ? lda : 1;
        long base = transA ? (long) p0 * lda + i0 : (long) i0 * lda + p0;
        int full = mc / MR * MR;
        for (int i = 0; i < full; i += MR) { // written out for MR = 5, as in packA
            long r0 = base + i * si, r1 = r0 + si, r2 = r1 + si, r3 = r2 + si, r4 = r3 + si;
            for (int k = 0, o = i * kc; k < kc; k++, o += MR) {
                long d = k * sk;
                ap[o] = a.getAtIndex(F32, r0 + d);
                ap[o + 1] = a.getAtIndex(F32, r1 + d);
                ap[o + 2] = a.getAtIndex(F32, r2 + d);
                ap[o + 3] = a.getAtIndex(F32, r3 + d);
                ap[o + 4] = a.getAtIndex(F32, r4 + d);
            }
        }
        if (full < mc) {
            packAFp32Edge(a, base + full * si, si, sk, mc - full, kc, ap, full * kc);
        }
    }

    /** Eight floats, for {@link #packATransFp32}'s copies of five (null when the kernels run narrower or scalar). */
    private static final VectorSpecies<Float> EIGHT = Simd.SCALAR || Simd.lanes() < 8 ? null : FloatVector.SPECIES_256;

    /**
     * {@link #packAFp32} for A stored K×M (op(A) = Aᵀ, the weight gradient's {@code doutᵀ}): each panel's row k is the
     * MR = 5 consecutive values {@code A[p0+k][i…i+5)}, so the block is packed one row of A at a time (one contiguous
     * run of mc values, one page, instead of a page per value down a column), each panel's five values copied as one
     * 8-float load and store. The store's three extra floats land in the same panel's row k+1, which the next row
     * overwrites; the last row, whose extras would reach the next panel's row 0, is copied value by value. So the
     * loads (three floats past a panel) run only on rows k &lt; kc−1, whose extra floats lie inside the segment: row k+1
     * of A follows (lda ≥ i0 + mc).
     */
    private static void packATransFp32(MemorySegment a, int lda, int i0, int mc, int p0, int kc, float[] ap) {
        int full = mc / MR * MR;
        for (int k = 0; k < kc; k++) {
            long row = (long) (p0 + k) * lda + i0;
            int o = k * MR;
            int i = 0;
            if (k < kc - 1) {
                for (; i < full; i += MR) {
                    FloatVector.fromMemorySegment(EIGHT, a, (row + i) * Float.BYTES, LE).intoArray(ap, i * kc + o);
                }
            }
            for (; i < full; i += MR) {
                int d = i * kc + o;
                long s = row + i;
                ap[d] = a.getAtIndex(F32, s);
                ap[d + 1] = a.getAtIndex(F32, s + 1);
                ap[d + 2] = a.getAtIndex(F32, s + 2);
                ap[d + 3] = a.getAtIndex(F32, s + 3);
                ap[d + 4] = a.getAtIndex(F32, s + 4);
            }
        }
        if (full < mc) {
            packAFp32Edge(a, (long) p0 * lda + i0 + full, 1, lda, mc - full, kc, ap, full * kc);
        }
    }

    /**
     * The last panel of {@link #packAFp32}, {@code rows} < MR rows, the others zero. A method of its own, with no
     * branch inside its loops: as a conditional in the main method it made C2 trap and recompile that method again
     * and again (profile predicates), leaving the packing, and the GEMM, 5× slower in some JVMs.
     */
    private static void packAFp32Edge(MemorySegment a, long base, long si, long sk, int rows, int kc, float[] ap,
                                      int o) {
        Arrays.fill(ap, o, o + MR * kc, 0f);
        for (int r = 0; r < rows; r++) {
            long src = base + r * si;
            for (int k = 0, d = o + r; k < kc; k++, d += MR) {
                ap[d] = a.getAtIndex(F32, src + k * sk);
            }
        }
    }

    /**
     * Packs op(B)[0…K, j0…j0+nc) into columns {@code bpCol0…} of a packed block {@code bpCols} columns wide (a
     * multiple of NR, as is bpCol0): consecutive K blocks of {@code kcBlock} rows, each block's panels side by side,
     * so the panels one K block's sweep reads follow each other in memory (one prefetch stream, not a new one every
     * panel); columns nc…roundUp(nc, NR) are zero. Threads can pack disjoint column ranges of one block.
     * {@code run} must hold {@code max(NR·K, roundUp(nc, NR))} floats.
     */
    static void packB(boolean transB, MemorySegment b, DType t, int ldb, int K, int kcBlock, int j0, int nc,
                      float[] bp, int bpCols, int bpCol0, float[] run, DType operands) {
        int ncPad = roundUp(nc, NR);
        if (!transB && plainFp32(t, operands)) {
            packBRowsFp32(b, ldb, K, kcBlock, j0, nc, bp, bpCols, bpCol0);
        } else if (!transB) { // B stored K×N: a run is part of a row of op(B), along j; copy it NR at a time
            for (int k = 0; k < K; k++) {
                decodeRun(b, t, (long) k * ldb + j0, run, 0, nc, operands);
                Arrays.fill(run, nc, ncPad, 0f);
                int pc = k - k % kcBlock;
                int kc = Math.min(kcBlock, K - pc);
                int base = pc * bpCols + bpCol0 * kc + (k - pc) * NR;
                for (int p = 0; p < ncPad; p += NR) {
                    copyNr(run, p, bp, base + p * kc);
                }
            }
        } else if (plainFp32(t, operands)) { // B stored N×K, fp32: copy each column of op(B) straight in
            for (int j = 0; j < ncPad; j += NR) {
                for (int pc = 0; pc < K; pc += kcBlock) {
                    int kc = Math.min(kcBlock, K - pc);
                    int base = pc * bpCols + (bpCol0 + j) * kc;
                    // TRANSPOSE_ROWS rows of the panel at a time, so the NR columns' strided writes land in an
                    // L1-sized piece of it (a whole panel, kc·NR floats, is 64 KiB at 512×16 and passes L1)
                    for (int k0 = 0; k0 < kc; k0 += TRANSPOSE_ROWS) {
                        int kn = Math.min(TRANSPOSE_ROWS, kc - k0);
                        int row0 = base + k0 * NR;
                        int c = 0;
                        if (Transpose.AVAILABLE) { // whole L×L blocks of columns inside the matrix, in registers
                            int kBlocks = kn - kn % Transpose.L;
                            for (; c + Transpose.L <= NR && j + c + Transpose.L <= nc; c += Transpose.L) {
                                long src = (long) (j0 + j + c) * ldb + pc + k0;
                                for (int k = 0; k < kBlocks; k += Transpose.L) {
                                    Transpose.block(b, src + k, ldb, bp, row0 + k * NR + c, NR);
                                }
                                for (int r = 0; r < Transpose.L; r++) { // the rows past the last whole block
                                    for (int k = kBlocks, o = row0 + kBlocks * NR + c + r; k < kn; k++, o += NR) {
                                        bp[o] = b.getAtIndex(F32, src + (long) r * ldb + k);
                                    }
                                }
                            }
                        }
                        for (; c < NR; c++) {
                            long src = (long) (j0 + j + c) * ldb + pc + k0;
                            if (j + c < nc) {
                                for (int k = 0, o = row0 + c; k < kn; k++, o += NR) {
                                    bp[o] = b.getAtIndex(F32, src + k);
                                }
                            } else { // columns nc… are zero
                                for (int k = 0, o = row0 + c; k < kn; k++, o += NR) {
                                    bp[o] = 0f;
                                }
                            }
                        }
                    }
                }
            }
        } else { // B stored N×K: decode the NR columns of op(B) of a panel, then interleave them k by k
            for (int j = 0; j < nc; j += NR) {
                int cols = Math.min(NR, nc - j);
                for (int c = 0; c < cols; c++) {
                    decodeRun(b, t, (long) (j0 + j + c) * ldb, run, c * K, K, operands);
                }
                Arrays.fill(run, cols * K, NR * K, 0f);
                for (int pc = 0; pc < K; pc += kcBlock) {
                    int kc = Math.min(kcBlock, K - pc);
                    int base = pc * bpCols + (bpCol0 + j) * kc;
                    for (int c = 0; c < NR; c++) { // column by column: sequential reads, C2 runs it faster
                        for (int k = 0, o = base + c, r = c * K + pc; k < kc; k++, o += NR) {
                            bp[o] = run[r + k];
                        }
                    }
                }
            }
        }
    }

    /**
     * {@link #packB} for B stored K×N with fp32 values taken as they are: each NR values of a row of op(B) go straight
     * from the segment into their panel as two vector copies, with no run buffer in between; the panel that holds
     * column nc−1, if partial, is {@link #packBRowEdge}'s (every panel in scalar mode). Against the run buffer and
     * {@link #copyNr} before it: gpt2-dinp 0.91–0.93× OpenBLAS → 0.94–0.96× on one Zen 4 thread. It goes
     * {@link #PACK_B_ROWS} rows of B at a time, panel after panel: each panel gets those rows' NR values as one
     * sequential run, and the rows, read again for each panel, stay in L1.
     */
    private static void packBRowsFp32(MemorySegment b, int ldb, int K, int kcBlock, int j0, int nc, float[] bp,
                                      int bpCols, int bpCol0) {
        int full = Simd.SCALAR ? 0 : nc / NR * NR;
        int half = NR / 2;
        int ncPad = roundUp(nc, NR);
        for (int pc = 0; pc < K; pc += kcBlock) {
            int kc = Math.min(kcBlock, K - pc);
            for (int k0 = 0; k0 < kc; k0 += PACK_B_ROWS) {
                int kn = Math.min(PACK_B_ROWS, kc - k0);
                for (int p = 0; p < ncPad; p += NR) {
                    int o = pc * bpCols + (bpCol0 + p) * kc + k0 * NR;
                    long src = (long) (pc + k0) * ldb + j0 + p;
                    if (p < full) {
                        for (int k = 0; k < kn; k++, o += NR, src += ldb) {
                            FloatVector.fromMemorySegment(Simd.FLOAT, b, src * Float.BYTES, LE).intoArray(bp, o);
                            FloatVector.fromMemorySegment(Simd.FLOAT, b, (src + half) * Float.BYTES, LE)
                                    .intoArray(bp, o + half);
                        }
                    } else { // the partial panel (every panel in scalar mode)
                        for (int k = 0; k < kn; k++, o += NR, src += ldb) {
                            packBRowEdge(b, src, Math.min(NR, nc - p), bp, o);
                        }
                    }
                }
            }
        }
    }

    /** One panel's row of {@link #packBRowsFp32} in scalar code: {@code cols} ≤ NR values, then zeros up to NR. */
    private static void packBRowEdge(MemorySegment b, long src, int cols, float[] bp, int o) {
        for (int c = 0; c < cols; c++) {
            bp[o + c] = b.getAtIndex(F32, src + c);
        }
        Arrays.fill(bp, o + cols, o + NR, 0f);
    }

    /** {@code dst[d…d+NR) = src[s…s+NR)}: two vectors, or a loop in scalar mode. */
    private static void copyNr(float[] src, int s, float[] dst, int d) {
        if (Simd.SCALAR) {
            System.arraycopy(src, s, dst, d, NR);
        } else {
            FloatVector.fromArray(Simd.FLOAT, src, s).intoArray(dst, d);
            FloatVector.fromArray(Simd.FLOAT, src, s + NR / 2).intoArray(dst, d + NR / 2);
        }
    }

    /**
     * Decodes {@code n} elements of a {@code t} segment from element {@code index} into {@code dst[dstIndex…+n)}, then
     * rounds them to {@code operands} ({@link #round}).
     */
    static void decodeRun(MemorySegment src, DType t, long index, float[] dst, int dstIndex, int n, DType operands) {
        switch (t) {
            case FP32 -> MemorySegment.copy(src, ValueLayout.JAVA_FLOAT_UNALIGNED, index * Float.BYTES, dst, dstIndex, n);
            case BF16 -> Casts.bf16ToF32(dst, dstIndex, src, index, n);
            case FP16 -> Casts.f16ToF32(dst, dstIndex, src, index, n);
            case FP8_E4M3, FP8_E5M2 -> Casts.fp8ToF32(t, dst, dstIndex, src, index, n, 1f);
        }
        if (operands != DType.FP32 && operands != t) {
            round(dst, dstIndex, n, operands);
        }
    }

    /**
     * {@code x[from…from+n) = decode(encode(x))} in {@code operands} (BF16 or FP16): each float rounded to the nearest
     * value of that format, ties to even, fp16 overflowing to ±inf — the scalar casts of {@link Bf16} and {@link Fp16}
     * element by element, which C2 compiles to a few integer operations (bf16) or the F16C conversions (fp16). (Going
     * through the bulk {@link Casts} and a 16-bit scratch buffer instead made the whole bf16/fp16 GEMM 2.3–3.7× slower
     * than fp32 on 256×256×768-class shapes: many runs are short, e.g. mc ≤ 72 floats in the transposed packs, and
     * pay the casts' entry checks four times each; this loop keeps the GEMM within measurement noise of fp32.)
     */
    static void round(float[] x, int from, int n, DType operands) {
        int to = from + n;
        switch (operands) {
            case BF16 -> {
                for (int i = from; i < to; i++) {
                    x[i] = Bf16.toFloat(Bf16.fromFloat(x[i]));
                }
            }
            case FP16 -> {
                for (int i = from; i < to; i++) {
                    x[i] = Fp16.toFloat(Fp16.fromFloat(x[i]));
                }
            }
            default -> throw new IllegalArgumentException("GEMM operands must be FP32, BF16 or FP16, got " + operands);
        }
    }

    static int roundUp(int x, int m) {
        return (x + m - 1) / m * m;
    }
}
