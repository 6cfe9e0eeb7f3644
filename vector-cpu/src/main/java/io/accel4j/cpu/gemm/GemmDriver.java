package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;
import static io.accel4j.cpu.gemm.Packing.roundUp;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * The blocked, threaded GEMM loop nest (after Goto and BLIS): packed B block in L3, packed A block in L2, one B
 * panel in L1, the C tile in registers.
 *
 * <pre>
 *   task t owns rows [m0,m1) × cols [n0,n1) of C                  (split over N or M, never over K)
 *     for jc in [n0,n1) step NC:      pack op(B)[0:K, jc:jc+nc]   → bp   (K·NC floats)
 *       for ic in [m0,m1) step MC:
 *         for pc in [0,K) step KC:    pack op(A)[ic:+mc, pc:+kc]  → ap   (MC·KC floats)
 *           for jr step NR: for ir step MR:   acc[ir:+MR, jr:+NR] (+)= ap-panel · bp-panel
 *                                              (acc stored tile by tile: each MR×NR tile is contiguous)
 *         epilogue: C[ic:+mc, jc:+nc] = alpha'·acc + beta·C + bias   (fp32 or bf16 store)
 * </pre>
 * Each element of C is summed in the same order (k blocks in order, fma per k) whichever task computes it, so
 * results do not depend on the thread count.
 */
final class GemmDriver {

    /** Rows of a packed A block (a multiple of MR); the A block MC×KC lives in L2. */
    static final int MC = roundUp(Integer.getInteger("accel4j.gemm.mc", 72), MR);
    /** Depth of a K block; one B panel KC×NR (16 KiB at 256×16) lives in L1. */
    static final int KC = Integer.getInteger("accel4j.gemm.kc", 256);
    /** Largest packed B block, in floats (K·NC ≤ this): 8 MiB. */
    static final int B_BLOCK_FLOATS = Integer.getInteger("accel4j.gemm.bfloats", 2 << 20);
    /** Below this many multiply-adds a GEMM runs on the calling thread alone. */
    static final long PARALLEL_THRESHOLD = 64L * 64 * 64;

    private GemmDriver() {}

    /** Per-thread packing buffers, grown on demand and reused across calls. */
    private static final class Workspace {
        float[] ap = new float[0];
        float[] bp = new float[0];
        float[] acc = new float[0];
        float[] run = new float[0];

        float[] ap(int n) { return ap.length >= n ? ap : (ap = new float[n]); }
        float[] bp(int n) { return bp.length >= n ? bp : (bp = new float[n]); }
        float[] acc(int n) { return acc.length >= n ? acc : (acc = new float[n]); }
        float[] run(int n) { return run.length >= n ? run : (run = new float[n]); }
    }

    private static final ThreadLocal<Workspace> WORKSPACE = ThreadLocal.withInitial(Workspace::new);

    static void gemm(Parallel pool, Layout layout, int M, int N, int K,
                     float alpha, MemorySegment a, DType aType, int lda,
                     MemorySegment b, DType bType, int ldb,
                     float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        if (M == 0 || N == 0) {
            return;
        }
        long work = (long) M * N * Math.max(K, 1);
        int threads = work < PARALLEL_THRESHOLD ? 1 : pool.threads();
        // Split the larger of M and N into equal runs of whole tiles; each task packs its share of that operand
        // and all of the other, so split the dimension whose operand is larger.
        boolean splitN = N >= M;
        int unit = splitN ? NR : MR;
        int units = ((splitN ? N : M) + unit - 1) / unit;
        int tasks = Math.min(threads, units);
        int per = units / tasks;
        int extra = units % tasks;
        pool.forEach(tasks, t -> {
            int u0 = t * per + Math.min(t, extra);
            int u1 = u0 + per + (t < extra ? 1 : 0);
            int lo = u0 * unit;
            int hi = Math.min(u1 * unit, splitN ? N : M);
            if (splitN) {
                block(layout, 0, M, lo, hi, K, alpha, a, aType, lda, b, bType, ldb, beta, c, cType, ldc, bias);
            } else {
                block(layout, lo, hi, 0, N, K, alpha, a, aType, lda, b, bType, ldb, beta, c, cType, ldc, bias);
            }
        });
    }

    /** C[m0:m1, n0:n1] on the calling thread. */
    private static void block(Layout layout, int m0, int m1, int n0, int n1, int K,
                              float alpha, MemorySegment a, DType aType, int lda,
                              MemorySegment b, DType bType, int ldb,
                              float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        Workspace ws = WORKSPACE.get();
        int ncMax = Math.max(NR, Math.min(roundUp(n1 - n0, NR), B_BLOCK_FLOATS / Math.max(K, 1) / NR * NR));
        float[] run = ws.run(Math.max(Math.max(NR * K, MR * KC), Math.max(MC, ncMax)));
        float[] bp = ws.bp(ncMax * K);
        float[] ap = ws.ap(MC * Math.min(KC, Math.max(K, 1)));
        float[] acc = ws.acc(MC * ncMax);
        for (int jc = n0; jc < n1; jc += ncMax) {
            int nc = Math.min(ncMax, n1 - jc);
            int ncPad = roundUp(nc, NR);
            Packing.packB(layout.transB(), b, bType, ldb, K, KC, jc, nc, bp, run);
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = Math.min(MC, m1 - ic);
                int mcPad = roundUp(mc, MR);
                Arrays.fill(acc, 0, mcPad * ncPad, 0f);
                for (int pc = 0; pc < K; pc += KC) {
                    int kc = Math.min(KC, K - pc);
                    Packing.packA(layout.transA(), a, aType, lda, ic, mc, pc, kc, ap, run);
                    for (int jr = 0; jr < ncPad; jr += NR) {
                        int bOff = pc * ncPad + jr * kc;
                        for (int ir = 0; ir < mcPad; ir += MR) {
                            MicroKernel.tile(kc, ap, ir * kc, bp, bOff, acc, ir * ncPad + jr * MR, NR);
                        }
                    }
                }
                Epilogue.store(acc, ncPad, mc, nc, alpha, beta, c, cType, ldc, ic, jc, bias);
            }
        }
    }
}
