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
 *   for jc in [0,N) step NC:          pack op(B)[0:K, jc:jc+nc]   → bp   (K·NC floats, shared: each
 *                                                                        thread packs some of its panels)
 *     task t owns rows [m0,m1)                                   (split over M; over N when M is small)
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

    // Block sizes; the accel4j.gemm.* properties exist for tuning runs (docs/PERFORMANCE.md), not for users.

    /** Rows of a packed A block (a multiple of MR); the A block MC×KC lives in L2. */
    static final int MC = roundUp(Integer.getInteger("accel4j.gemm.mc", 72), MR);
    /**
     * Depth of a K block: one B panel is KC×NR floats (32 KiB at 512×16). 512 measured best here; 256 and 384 were
     * about 5 % slower.
     */
    static final int KC = Integer.getInteger("accel4j.gemm.kc", 512);
    /** Most columns of one packed B block (a multiple of every NR): the accumulator is MC×NC_MAX floats at most. */
    static final int NC_MAX = 4096;
    /** Largest packed B block, in floats (K·NC ≤ this): 8 MiB. */
    static final int B_BLOCK_FLOATS = Integer.getInteger("accel4j.gemm.bfloats", 2 << 20);
    /** With fewer row tiles than this per thread, threads split the columns instead of the rows. */
    static final int MIN_TILES_PER_THREAD = 4;
    /** Below this many multiply-adds a GEMM runs on the calling thread alone. */
    static final long PARALLEL_THRESHOLD = 100L * 100 * 100; // handing work to a thread costs ~20–30 µs here

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
        int rowTiles = (M + MR - 1) / MR;
        if (threads > 1 && rowTiles < MIN_TILES_PER_THREAD * threads) {
            splitColumns(pool, threads, layout, M, N, K, alpha, a, aType, lda, b, bType, ldb, beta, c, cType, ldc,
                    bias);
            return;
        }
        // Threads share one packed B block (each packs some of its panels), then each computes its own rows.
        int tasks = Math.min(threads, rowTiles);
        int ncMax = blockColumns(N, K);
        float[] bp = WORKSPACE.get().bp(ncMax * K); // the caller's: it waits in forEach while the others read it
        for (int jc = 0; jc < N; jc += ncMax) {
            int j0 = jc;
            int nc = Math.min(ncMax, N - jc);
            int ncPad = roundUp(nc, NR);
            int panels = ncPad / NR;
            int packTasks = Math.min(tasks, panels);
            pool.forEach(packTasks, t -> {
                int p0 = share(panels, packTasks, t);
                int p1 = share(panels, packTasks, t + 1);
                int cols = Math.min(nc, p1 * NR) - p0 * NR;
                Packing.packB(layout.transB(), b, bType, ldb, K, KC, j0 + p0 * NR, cols, bp, ncPad, p0 * NR,
                        WORKSPACE.get().run(runLength(K, ncMax)));
            });
            pool.forEach(tasks, t -> {
                int m0 = share(rowTiles, tasks, t) * MR;
                int m1 = Math.min(M, share(rowTiles, tasks, t + 1) * MR);
                rows(layout, m0, m1, j0, nc, K, alpha, a, aType, lda, bp, beta, c, cType, ldc, bias);
            });
        }
    }

    /** Too few rows to share: each task takes whole tiles of columns and packs its own B. */
    private static void splitColumns(Parallel pool, int threads, Layout layout, int M, int N, int K,
                                     float alpha, MemorySegment a, DType aType, int lda,
                                     MemorySegment b, DType bType, int ldb,
                                     float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        int colTiles = (N + NR - 1) / NR;
        int tasks = Math.min(threads, colTiles);
        pool.forEach(tasks, t -> {
            int n0 = share(colTiles, tasks, t) * NR;
            int n1 = Math.min(N, share(colTiles, tasks, t + 1) * NR);
            Workspace ws = WORKSPACE.get();
            int ncMax = blockColumns(n1 - n0, K);
            float[] bp = ws.bp(ncMax * K);
            for (int jc = n0; jc < n1; jc += ncMax) {
                int nc = Math.min(ncMax, n1 - jc);
                Packing.packB(layout.transB(), b, bType, ldb, K, KC, jc, nc, bp, roundUp(nc, NR), 0,
                        ws.run(runLength(K, ncMax)));
                rows(layout, 0, M, jc, nc, K, alpha, a, aType, lda, bp, beta, c, cType, ldc, bias);
            }
        });
    }

    /**
     * C[m0:m1, jc:jc+nc] on the calling thread, from B packed in {@code bp} (columns jc…jc+nc, all of K): packs
     * its own blocks of A, runs the micro-kernel over them, and writes C through the epilogue.
     */
    private static void rows(Layout layout, int m0, int m1, int jc, int nc, int K,
                             float alpha, MemorySegment a, DType aType, int lda, float[] bp,
                             float beta, MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        Workspace ws = WORKSPACE.get();
        int ncPad = roundUp(nc, NR);
        float[] run = ws.run(runLength(K, ncPad));
        float[] ap = ws.ap(MC * Math.min(KC, Math.max(K, 1)));
        float[] acc = ws.acc(MC * ncPad);
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

    /**
     * Columns of one packed B block: all of them, unless K·N floats would pass {@link #B_BLOCK_FLOATS} or N would
     * pass {@link #NC_MAX} (which bounds the MC×NC accumulator when K is small).
     */
    static int blockColumns(int n, int K) {
        int byB = B_BLOCK_FLOATS / Math.max(K, 1) / NR * NR;
        return Math.max(NR, Math.min(roundUp(n, NR), Math.min(NC_MAX, byB)));
    }

    /** Floats of the decode buffer the packing needs. */
    private static int runLength(int K, int ncPad) {
        return Math.max(Math.max(NR * K, MR * KC), Math.max(MC, ncPad));
    }

    /** Start of share {@code t} of {@code units} split as evenly as possible over {@code parts}. */
    private static int share(int units, int parts, int t) {
        return (int) ((long) units * t / parts);
    }
}
