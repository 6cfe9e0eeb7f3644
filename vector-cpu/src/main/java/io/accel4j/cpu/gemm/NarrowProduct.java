package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;
import static io.accel4j.cpu.gemm.Packing.roundUp;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * The GEMM's route for a short, wide product of one K block: the LM head's {@code logits(B·T, Vp) = inp·Wᵀ}
 * (256 × 50304, K = 256 on the bench model). With so few rows, each packed value of B serves only M row tiles, and
 * {@link GemmDriver}'s usual order — pack a B block of up to {@link GemmDriver#NC_MAX} columns, then sweep it once
 * per A block — writes and rereads megabytes of packed B through L3 for little work: measured, up to a sixth of the
 * product. Here op(A) is packed once, whole (it fits L2), and B is never packed as a block:
 * <pre>
 *   ap = pack op(A)[0:M, 0:K]                                    (once, by the caller; the tasks only read it)
 *   task t owns NARROW_PANELS column panels; for each group of STORE_PANELS of them:
 *     for each panel j:  bp = pack op(B)[0:K, j:j+NR]   (K·NR floats, in L1)
 *                        acc[:, j] = ap · bp            (every row tile of A against the panel)
 *     epilogue: C[0:M, group] from acc                  (rows of STORE_PANELS·NR contiguous values)
 * </pre>
 * A plain fp32 store ({@link Epilogue#direct}) skips the accumulator: each full tile goes straight into C
 * ({@link GemmDriver#blockInto}): lm-fwd 90 → 94 GFLOP/s on one Zen 4 thread.
 * Each element of C is the same fma chain over the one K block as in {@link GemmDriver}'s shallow rows, from zero:
 * the same bits, whichever route, task or thread computes it.
 */
final class NarrowProduct {

    /** Most floats of the whole packed A (384 KiB: it stays in L2 beside a B panel). */
    static final int A_FLOATS = 96 << 10;
    /** Column panels one task takes (the pool hands tasks out as threads come free). */
    static final int TASK_PANELS = 16;
    /**
     * Panels whose accumulators are stored together: 8 (256 columns at NR = 32) measured best on lm-fwd, 1 about 10 %
     * slower (short row pieces), 16 no better.
     */
    static final int STORE_PANELS = 8;

    private NarrowProduct() {}

    /** True for a product of one K block whose packed A fits {@link #A_FLOATS}, wider than one packed B block. */
    static boolean applies(int M, int N, int K) {
        return K <= GemmDriver.KC && (long) roundUp(M, MR) * Math.max(K, 1) <= A_FLOATS && N > GemmDriver.NC_MAX;
    }

    static void gemm(Parallel pool, int threads, Layout layout, int M, int N, int K,
                     MemorySegment a, DType aType, int lda,
                     MemorySegment b, DType bType, int ldb,
                     Epilogue out, DType operands) {
        int mPad = roundUp(M, MR);
        GemmDriver.Workspace caller = GemmDriver.WORKSPACE.get();
        float[] ap = caller.ap(mPad * Math.max(K, 1)); // the caller's: the others read it while it waits in forEach
        Packing.packA(layout.transA(), a, aType, lda, 0, M, 0, K, ap, caller.run(GemmDriver.runLength(K, NR)),
                operands);
        int colTiles = (N + NR - 1) / NR;
        int tasks = (colTiles + TASK_PANELS - 1) / TASK_PANELS;
        if (out.direct()) {
            GemmDriver.forEach(pool, threads, tasks, t -> {
                GemmDriver.Workspace ws = GemmDriver.WORKSPACE.get();
                float[] bp = ws.bp(NR * Math.max(K, 1));
                float[] run = ws.run(GemmDriver.runLength(K, NR));
                int j1 = Math.min(N, (t + 1) * TASK_PANELS * NR);
                for (int jr = t * TASK_PANELS * NR; jr < j1; jr += NR) {
                    int cols = Math.min(NR, j1 - jr);
                    Packing.packB(layout.transB(), b, bType, ldb, K, GemmDriver.KC, jr, cols, bp, NR, 0, run,
                            operands);
                    GemmDriver.blockInto(K, ap, M, bp, cols, out, 0, jr, false, ws);
                }
            });
            return;
        }
        GemmDriver.forEach(pool, threads, tasks, t -> {
            GemmDriver.Workspace ws = GemmDriver.WORKSPACE.get();
            float[] bp = ws.bp(NR * Math.max(K, 1));
            float[] acc = ws.acc(mPad * NR * STORE_PANELS);
            float[] run = ws.run(GemmDriver.runLength(K, NR));
            int j1 = Math.min(N, (t + 1) * TASK_PANELS * NR);
            for (int js = t * TASK_PANELS * NR; js < j1; js += STORE_PANELS * NR) {
                int ns = Math.min(STORE_PANELS * NR, j1 - js);
                for (int jr = 0; jr < ns; jr += NR) {
                    Packing.packB(layout.transB(), b, bType, ldb, K, GemmDriver.KC, js + jr, Math.min(NR, ns - jr),
                            bp, NR, 0, run, operands);
                    int accOff = jr * mPad; // panel jr/NR of the group: mPad·NR floats apart
                    Arrays.fill(acc, accOff, accOff + mPad * NR, 0f);
                    for (int ir = 0; ir < mPad; ir += MR) {
                        MicroKernel.tile(K, ap, ir * K, bp, 0, acc, accOff + ir * NR, NR);
                    }
                }
                out.store(acc, 0, mPad * NR, M, ns, 0, js);
            }
        });
    }
}
