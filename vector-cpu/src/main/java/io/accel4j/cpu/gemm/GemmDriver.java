package io.accel4j.cpu.gemm;

import static io.accel4j.cpu.gemm.MicroKernel.MR;
import static io.accel4j.cpu.gemm.MicroKernel.NR;
import static io.accel4j.cpu.gemm.Packing.roundUp;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.function.IntConsumer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The blocked, threaded GEMM loop nest (after Goto and BLIS): packed B block in L3, packed A block in L2, one B
 * panel in L1, the C tile in registers.
 *
 * <pre>
 *   for jc in [0,N) step NC:          pack op(B)[0:K, jc:jc+nc]   → bp   (K·NC floats, shared: each
 *                                                                        thread packs some of its panels)
 *     task t owns rows [m0,m1), about one A block (rowTasks)       (split over M; over N, each task packing its
 *                                                                  own B, when C is no taller than wide: see
 *                                                                  splitsColumns; tasks go to threads as they
 *                                                                  come free)
 *       for ic in [m0,m1) step MC:
 *         for pc in [0,K) step KC:    pack op(A)[ic:+mc, pc:+kc]  → ap   (MC·KC floats)
 *           for jr step NR: for ir step MR:   acc[ir:+MR, jr:+NR] (+)= ap-panel · bp-panel
 *                                              (acc in column panels of NR: the tiles follow each other in
 *                                               the order the loop visits them, so the kernel reads and writes
 *                                               its accumulator as one sequential stream)
 *         epilogue: C[ic:+mc, jc:+nc] = alpha'·acc + beta·C + bias   (fp32 or bf16 store; or a fused
 *                   GELU / dGELU store, {@link Epilogue})
 * </pre>
 * <p>When K ≤ KC (one K block) the A block is packed once per ic and serves every column: it is taller than MC and
 * the columns are swept in sub-blocks whose accumulator stays in L2 ({@link #shallowRows}).
 * Each element of C is summed in the same order (k blocks in order, fma per k) whichever task computes it, so
 * results do not depend on the thread count. A long reduction into a small C takes another route, split K
 * ({@link #splitK}): fixed chunks of K computed in parallel, their partial products summed in chunk order; a short,
 * wide product of one K block a third, {@link NarrowProduct}.
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
    /**
     * Largest packed B block, in floats (K·NC ≤ this): 12 MiB, within the 32 MiB L3 of Zen 3, 4 and 5. Against 8 MiB,
     * gpt2-dinp's B (3072×768) and gpt2-fwd's (768×3072) become one block instead of a wide and a narrow one, whose
     * A block was packed again for 96 or 352 columns: +0.6 % and +2.3 % on one Zen 4 thread, +2.3 % and +1.1 % on
     * two (alternated in one JVM).
     */
    static final int B_BLOCK_FLOATS = Integer.getInteger("accel4j.gemm.bfloats", 3 << 20);
    /** Fewer row tiles than this per thread: threads split the columns; see {@link #splitsColumns}. */
    static final int MIN_TILES_PER_THREAD = 4;
    /** Most rows of an A block when K ≤ KC ({@link #shallowBlockRows}): 4·MC. */
    static final int SHALLOW_ROWS_MAX = roundUp(Integer.getInteger("accel4j.gemm.shallowrows", 4 * MC), MR);
    /** Largest accumulator of a column sub-block when K ≤ KC, in floats (192 KiB, with the A block in L2). */
    static final int SUB_ACC_FLOATS = 48 << 10;
    /** Depth of one split-K chunk (four K blocks); see {@link #splitK}. */
    static final int K_CHUNK = 4 * KC;
    /** Reductions at least this deep over a small C are split into chunks of K ({@link #splitsK}). */
    static final int SPLIT_K_MIN_DEPTH = 4 * K_CHUNK;
    /**
     * Most floats of one chunk's packed B (8 MiB): bounds the columns a split K is used for (1024 at K_CHUNK 2048).
     * Fixed apart from {@link #B_BLOCK_FLOATS}: which products split K decides how they round.
     */
    static final int SPLIT_K_B_FLOATS = 2 << 20;
    /** Most floats the split-K partials take together (16 MiB): bounds the C that a split K is used for. */
    static final int SPLIT_K_MAX_FLOATS = 4 << 20;
    /** Below this many multiply-adds a GEMM runs on the calling thread alone. */
    static final long PARALLEL_THRESHOLD = 100L * 100 * 100; // handing work to a thread costs ~20–30 µs here

    private static final VectorSpecies<Float> S = Simd.FLOAT;

    private GemmDriver() {}

    /** Per-thread packing buffers, grown on demand and reused across calls. */
    static final class Workspace {
        float[] ap = new float[0];
        float[] bp = new float[0];
        float[] acc = new float[0];
        float[] run = new float[0];
        float[] partials = new float[0];
        float[] groupSums = new float[0];
        /** One tile's accumulator, for {@link #panelInto}'s edge tiles. */
        final float[] edge = new float[MR * NR];

        float[] ap(int n) { return ap.length >= n ? ap : (ap = new float[n]); }
        float[] bp(int n) { return bp.length >= n ? bp : (bp = new float[n]); }
        float[] acc(int n) { return acc.length >= n ? acc : (acc = new float[n]); }
        float[] run(int n) { return run.length >= n ? run : (run = new float[n]); }
        float[] partials(int n) { return partials.length >= n ? partials : (partials = new float[n]); }
        float[] groupSums(int n) { return groupSums.length >= n ? groupSums : (groupSums = new float[n]); }
    }

    static final ThreadLocal<Workspace> WORKSPACE = ThreadLocal.withInitial(Workspace::new);

    static void gemm(Parallel pool, Layout layout, int M, int N, int K,
                     MemorySegment a, DType aType, int lda,
                     MemorySegment b, DType bType, int ldb,
                     Epilogue out, DType operands) {
        if (M == 0 || N == 0) {
            return;
        }
        long work = (long) M * N * Math.max(K, 1);
        int threads = work < PARALLEL_THRESHOLD ? 1 : pool.threads();
        if (splitsK(M, N, K)) {
            splitK(pool, threads, layout, M, N, K, a, aType, lda, b, bType, ldb, out, operands);
            return;
        }
        if (NarrowProduct.applies(M, N, K)) {
            NarrowProduct.gemm(pool, threads, layout, M, N, K, a, aType, lda, b, bType, ldb, out, operands);
            return;
        }
        int rowTiles = (M + MR - 1) / MR;
        boolean streamsC = (long) M * N > STREAMED_C_FLOATS;
        if (threads > 1 && splitsColumns(threads, M, N)) {
            if (packsBPerThread(threads, M, N, K)) {
                splitRowsOwnB(pool, threads, layout, M, N, K, a, aType, lda, b, bType, ldb, out, streamsC, operands);
                return;
            }
            splitColumns(pool, threads, layout, M, N, K, a, aType, lda, b, bType, ldb, out, streamsC, operands);
            return;
        }
        // Threads share one packed B block (each packs some of its panels), then compute rows, a block of A per task.
        int tasks = rowTasks(threads, M, K);
        int ncMax = blockColumns(N, K);
        float[] bp = WORKSPACE.get().bp(ncMax * K); // the caller's: it waits in forEach while the others read it
        for (int jc = 0; jc < N; jc += ncMax) {
            int j0 = jc;
            int nc = Math.min(ncMax, N - jc);
            int ncPad = roundUp(nc, NR);
            int panels = ncPad / NR;
            int packTasks = Math.min(tasks, panels);
            forEach(pool, threads, packTasks, t -> {
                int p0 = share(panels, packTasks, t);
                int p1 = share(panels, packTasks, t + 1);
                int cols = Math.min(nc, p1 * NR) - p0 * NR;
                Packing.packB(layout.transB(), b, bType, ldb, K, KC, j0 + p0 * NR, cols, bp, ncPad, p0 * NR,
                        WORKSPACE.get().run(runLength(K, ncMax)), operands);
            });
            forEach(pool, threads, tasks, t -> {
                int m0 = share(rowTiles, tasks, t) * MR;
                int m1 = Math.min(M, share(rowTiles, tasks, t + 1) * MR);
                rows(layout, m0, m1, j0, nc, K, a, aType, lda, bp, out, streamsC, operands);
            });
        }
    }

    /** Columns of the bias gradient one task of {@link #gemmDgelu}'s final sum adds (a multiple of every V). */
    static final int BIAS_COLUMNS = 128;

    /**
     * {@code C = gelu'(pre)·(op(A)·op(B))} with fp32 A and B, and {@code biasGrad (N) += Σ_rows C} when biasGrad is
     * not null: the GEMM's epilogue ({@link Epilogue#dgelu}) leaves column sums of every MR rows in the calling
     * thread's workspace, which are then added into biasGrad in row order, tasks of {@link #BIAS_COLUMNS} columns.
     */
    static void gemmDgelu(Parallel pool, Layout layout, int M, int N, int K, MemorySegment a, int lda,
                          MemorySegment b, int ldb, MemorySegment c, int ldc, MemorySegment pre, int ldpre,
                          MemorySegment biasGrad, DType operands) {
        if (M == 0 || N == 0) {
            return;
        }
        // the caller's: the other threads fill it while it waits in forEach
        float[] groupSums = biasGrad == null ? null : WORKSPACE.get().groupSums((M + MR - 1) / MR * N);
        gemm(pool, layout, M, N, K, a, DType.FP32, lda, b, DType.FP32, ldb,
                Epilogue.dgelu(c, ldc, pre, ldpre, groupSums, N), operands);
        if (biasGrad != null) {
            int tasks = (N + BIAS_COLUMNS - 1) / BIAS_COLUMNS;
            int threads = (long) M * N < PARALLEL_THRESHOLD ? 1 : pool.threads();
            forEach(pool, threads, tasks, t -> Epilogue.addGroupSums(groupSums, N, M, biasGrad, t * BIAS_COLUMNS,
                    Math.min(N, (t + 1) * BIAS_COLUMNS)));
        }
    }

    /**
     * Tasks the rows of C are cut into: one per block of A ({@link #MC} rows, or {@link #shallowBlockRows} when
     * K ≤ KC), rounded up to a multiple of the threads, at most one per row tile. The pool hands tasks out as threads
     * come free, so a thread that another process preempts (the machine is shared) does fewer of them instead of
     * making the other wait at the end; each element of C is computed the same way whichever task holds it. The
     * rounding keeps an unloaded machine's threads even: 1024 rows in blocks of 72 are 15 tasks, 8 on one thread
     * and 7 on the other, where 16 smaller ones split 8 and 8 (+1.8 to +2.3 % on two Zen 4 threads at gpt2-dinp,
     * 1024³ and gpt2-dw, turns alternated in one JVM).
     */
    static int rowTasks(int threads, int M, int K) {
        int blockRows = K <= KC ? shallowBlockRows(K) : MC;
        int rowTiles = (M + MR - 1) / MR;
        int blocks = Math.max(threads, (M + blockRows - 1) / blockRows);
        return Math.min(rowTiles, roundUp(blocks, threads));
    }

    /**
     * Whether threads split C's columns rather than its rows: when there are too few rows to share, and when C is no
     * taller than wide with enough column tiles for every thread. Split by columns, each task packs the B it reads and
     * all of A (A is the smaller operand then); split by rows, the threads share one packed B block, each reading the
     * panels the others packed, after a barrier. On a 2-vCPU guest whose cores sit now in one CCX and now in two (a
     * cache line's round trip between them measured 70 ns or 340 ns, switching every few seconds), sharing B cost
     * the 256-row products of a GPT-2 step 13–25 % (256×1024×256 NN, 256×768×256 NT, 256×256×1024 NT: the column
     * split 1.25×, 1.13×, 1.13× the row split, medians of 30 alternated pairs in one JVM); at 1024³ and the GPT-2 and
     * LM-head forward shapes the two were within 0–3 %. Either way each element of C is the same sum (the row blocks
     * are the same), so the choice does not change the bits.
     */
    static boolean splitsColumns(int threads, int M, int N) {
        int rowTiles = (M + MR - 1) / MR;
        int colTiles = (N + NR - 1) / NR;
        return rowTiles < MIN_TILES_PER_THREAD * threads
                || (M <= N && colTiles >= MIN_TILES_PER_THREAD * threads);
    }

    /** Most floats of B (K·N) that {@link #packsBPerThread} lets every thread pack for itself: 1 Mi (4 MiB). */
    static final long OWN_B_MAX_FLOATS = 1L << 20;

    /**
     * Whether a product that {@link #splitsColumns} would split by columns is split by rows instead, each thread
     * packing all of B for itself ({@link #splitRowsOwnB}): when B is small ({@link #OWN_B_MAX_FLOATS}) and there are
     * rows enough for every thread. That keeps what each thread writes of C whole rows, the same rows from one call
     * to the next ({@link Parallel}'s ranges), so the row-wise kernels that read C next (layer norm, residual adds,
     * the next GEMM's A) find their rows in their own core's caches instead of half of every row in the other core's:
     * the bench model's 256-row products (B at most 256×1024), not the LM head's (B 50304×256). Same row blocks, so
     * the same bits as either other split.
     */
    static boolean packsBPerThread(int threads, int M, int N, int K) {
        int rowTiles = (M + MR - 1) / MR;
        return rowTiles >= MIN_TILES_PER_THREAD * threads && (long) N * Math.max(K, 1) <= OWN_B_MAX_FLOATS;
    }

    /**
     * One task per thread, each taking a contiguous share of whole row tiles and packing all of B itself
     * ({@link #packsBPerThread}).
     */
    private static void splitRowsOwnB(Parallel pool, int threads, Layout layout, int M, int N, int K,
                                      MemorySegment a, DType aType, int lda,
                                      MemorySegment b, DType bType, int ldb,
                                      Epilogue out, boolean streamsC, DType operands) {
        int rowTiles = (M + MR - 1) / MR;
        int tasks = Math.min(threads, rowTiles);
        pool.forEach(tasks, t -> {
            int m0 = share(rowTiles, tasks, t) * MR;
            int m1 = Math.min(M, share(rowTiles, tasks, t + 1) * MR);
            Workspace ws = WORKSPACE.get();
            int ncMax = blockColumns(N, K);
            float[] bp = ws.bp(ncMax * K);
            for (int jc = 0; jc < N; jc += ncMax) {
                int nc = Math.min(ncMax, N - jc);
                Packing.packB(layout.transB(), b, bType, ldb, K, KC, jc, nc, bp, roundUp(nc, NR), 0,
                        ws.run(runLength(K, ncMax)), operands);
                rows(layout, m0, m1, jc, nc, K, a, aType, lda, bp, out, streamsC, operands);
            }
        });
    }

    /** Each task takes whole tiles of columns and packs its own B ({@link #splitsColumns}). */
    private static void splitColumns(Parallel pool, int threads, Layout layout, int M, int N, int K,
                                     MemorySegment a, DType aType, int lda,
                                     MemorySegment b, DType bType, int ldb,
                                     Epilogue out, boolean streamsC, DType operands) {
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
                        ws.run(runLength(K, ncMax)), operands);
                rows(layout, 0, M, jc, nc, K, a, aType, lda, bp, out, streamsC, operands);
            }
        });
    }

    /**
     * C[m0:m1, jc:jc+nc] on the calling thread, from B packed in {@code bp} (columns jc…jc+nc, all of K): packs
     * its own blocks of A, runs the micro-kernel over them, and writes C through the epilogue.
     */
    private static void rows(Layout layout, int m0, int m1, int jc, int nc, int K,
                             MemorySegment a, DType aType, int lda, float[] bp, Epilogue out, boolean streamsC,
                             DType operands) {
        if (K <= KC) {
            shallowRows(layout, m0, m1, jc, nc, K, a, aType, lda, bp, out, streamsC, operands);
            return;
        }
        Workspace ws = WORKSPACE.get();
        int ncPad = roundUp(nc, NR);
        float[] acc = ws.acc(MC * ncPad);
        for (int ic = m0; ic < m1; ic += MC) {
            int mc = Math.min(MC, m1 - ic);
            product(layout.transA(), a, aType, lda, ic, mc, K, bp, ncPad, acc, 0, ws, operands);
            out.store(acc, 0, roundUp(mc, MR) * NR, mc, nc, ic, jc);
        }
    }

    /**
     * {@link #rows} for a reduction of one K block (K ≤ KC, as the LM head's {@code logits = inp·Wᵀ} and
     * {@code dW = doutᵀ·inp} with K = 256): the A block is packed once and serves every column, so it can be
     * taller ({@link #shallowBlockRows}: longer runs when A is stored transposed, fewer blocks), and the columns
     * are done in sub-blocks of {@link #subBlockColumns} whose accumulator stays in L2 instead of one accumulator
     * as wide as the B block. One K block: each element is the same fma chain as in {@link #product}.
     */
    private static void shallowRows(Layout layout, int m0, int m1, int jc, int nc, int K,
                                    MemorySegment a, DType aType, int lda, float[] bp, Epilogue out,
                                    boolean streamsC, DType operands) {
        Workspace ws = WORKSPACE.get();
        int mcMax = shallowBlockRows(K);
        int sub = subBlockColumns(mcMax);
        float[] ap = ws.ap(mcMax * Math.max(K, 1));
        float[] run = ws.run(runLength(K, roundUp(nc, NR)));
        float[] acc = ws.acc(mcMax * sub);
        for (int ic = m0; ic < m1; ic += mcMax) {
            int mc = Math.min(mcMax, m1 - ic);
            int mcPad = roundUp(mc, MR);
            Packing.packA(layout.transA(), a, aType, lda, ic, mc, 0, K, ap, run, operands);
            if (out.direct()) { // one K block: panel j starts at j·K
                blockInto(K, ap, mc, bp, nc, out, ic, jc, streamsC, ws);
                continue;
            }
            for (int js = 0; js < nc; js += sub) {
                int ns = Math.min(sub, nc - js);
                int nsPad = roundUp(ns, NR);
                Arrays.fill(acc, 0, mcPad * nsPad, 0f);
                for (int jr = 0; jr < nsPad; jr += NR) {
                    int bOff = (js + jr) * K; // one K block: panel j starts at j·K
                    for (int ir = 0; ir < mcPad; ir += MR) {
                        MicroKernel.tile(K, ap, ir * K, bp, bOff, acc, jr * mcPad + ir * NR, NR);
                    }
                }
                out.store(acc, 0, mcPad * NR, mc, ns, ic, jc + js);
            }
        }
    }

    /**
     * A block of a product of one K block, stored by {@code out} ({@link Epilogue#direct}) with no block accumulator:
     * the packed A block ({@code rows} rows) against the {@code nc} columns of packed B panels from {@code bp} (panel
     * j at {@code j·kc}), full tiles straight into C ({@link MicroKernel#tileInto}), a tile cut by the last rows or
     * columns through a one-tile accumulator and {@link Epilogue#store}. Each element is the one fma chain from zero
     * and the same store, so the bits of the block accumulator's route. The full tiles are visited a B panel at a time
     * (the panel stays in L1), or, when {@code rowMajor}, a row tile at a time across every panel (the B block then
     * streams from L2, but C is written row after row: when C is too big for the caches, its lines' write misses
     * follow each other in order, which the prefetchers serve; see {@link #STREAMED_C_FLOATS}).
     */
    static void blockInto(int kc, float[] ap, int rows, float[] bp, int nc, Epilogue out, int row, int col,
                          boolean rowMajor, Workspace ws) {
        int fullRows = rows / MR * MR;
        int fullCols = nc / NR * NR;
        if (rowMajor) {
            for (int ir = 0; ir < fullRows; ir += MR) {
                for (int jr = 0; jr < fullCols; jr += NR) {
                    MicroKernel.tileInto(kc, ap, ir * kc, bp, jr * kc, out, row + ir, col + jr);
                }
            }
        } else {
            for (int jr = 0; jr < fullCols; jr += NR) {
                for (int ir = 0; ir < fullRows; ir += MR) {
                    MicroKernel.tileInto(kc, ap, ir * kc, bp, jr * kc, out, row + ir, col + jr);
                }
            }
        }
        float[] edge = ws.edge;
        for (int jr = 0; jr < nc; jr += NR) {
            int cols = Math.min(NR, nc - jr);
            for (int ir = cols == NR ? fullRows : 0; ir < rows; ir += MR) {
                Arrays.fill(edge, 0f);
                MicroKernel.tile(kc, ap, ir * kc, bp, jr * kc, edge, 0, NR);
                out.store(edge, 0, MR * NR, Math.min(MR, rows - ir), cols, row + ir, col + jr);
            }
        }
    }

    /**
     * Above this many floats (4 MiB) C is taken to stream from memory, and {@link #blockInto} writes it a row tile at
     * a time: lm-dw (50304×256, K = 256) 84 → 93 GFLOP/s on one Zen 4 thread against the panel order, while products
     * whose C stays in cache (1024×256 and smaller) run 1–5 % faster a panel at a time.
     */
    static final long STREAMED_C_FLOATS = 1L << 20;

    /**
     * Rows of an A block when K ≤ KC: as many as keep the block near MC·KC floats (the L2 share it has when K is
     * deep), a multiple of MR between MC and {@link #SHALLOW_ROWS_MAX}.
     */
    static int shallowBlockRows(int K) {
        int rows = MC * KC / Math.max(Math.min(K, KC), 1);
        return Math.max(MC, Math.min(SHALLOW_ROWS_MAX, roundUp(rows, MR)));
    }

    /**
     * Columns of a sub-block of {@link #shallowRows}: a multiple of NR whose mcMax-row accumulator fits
     * SUB_ACC_FLOATS.
     */
    static int subBlockColumns(int mcMax) {
        return Math.max(NR, SUB_ACC_FLOATS / mcMax / NR * NR);
    }

    /**
     * One row block of the product: {@code acc[accOff…] = op(A)[ic:ic+mc, 0:K]·B}, B packed in {@code bp}
     * ({@code ncPad} columns, all of K), acc in column panels of NR, {@code roundUp(mc, MR)·NR} floats apart
     * ({@link Epilogue#store}): tile (ir, jr) at {@code accOff + jr·mcPad + ir·NR}, so the sweep below walks acc
     * from start to end once per K block. Packs A K block by K block into the calling thread's workspace.
     */
    private static void product(boolean transA, MemorySegment a, DType aType, int lda, int ic, int mc, int K,
                                float[] bp, int ncPad, float[] acc, int accOff, Workspace ws, DType operands) {
        int mcPad = roundUp(mc, MR);
        float[] run = ws.run(runLength(K, ncPad));
        float[] ap = ws.ap(MC * Math.min(KC, Math.max(K, 1)));
        Arrays.fill(acc, accOff, accOff + mcPad * ncPad, 0f);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = Math.min(KC, K - pc);
            Packing.packA(transA, a, aType, lda, ic, mc, pc, kc, ap, run, operands);
            for (int jr = 0; jr < ncPad; jr += NR) {
                int bOff = pc * ncPad + jr * kc;
                for (int ir = 0; ir < mcPad; ir += MR) {
                    MicroKernel.tile(kc, ap, ir * kc, bp, bOff, acc, accOff + jr * mcPad + ir * NR, NR);
                }
            }
        }
    }

    /**
     * True when the product is a long reduction into a small C, which {@link #splitK} computes: K at least
     * {@link #SPLIT_K_MIN_DEPTH}, one chunk of B fits {@link #SPLIT_K_B_FLOATS}, and all the partials fit
     * {@link #SPLIT_K_MAX_FLOATS}. Depends on the shape alone, never on the thread count.
     */
    static boolean splitsK(int M, int N, int K) {
        if (K < SPLIT_K_MIN_DEPTH) {
            return false;
        }
        long ncPad = roundUp(N, NR);
        long chunks = (K + K_CHUNK - 1) / K_CHUNK;
        return ncPad <= NC_MAX && ncPad * K_CHUNK <= SPLIT_K_B_FLOATS
                && chunks * roundUp(M, MR) * ncPad <= SPLIT_K_MAX_FLOATS;
    }

    /**
     * Split K (the LM head's {@code dinp = dlogits·W}: 256×256, K = 50304). Without it, B (K×N) would not fit one
     * packed block, so it would be cut into narrow column blocks and all of A packed again for each.
     * <pre>
     *   chunk q covers k in [q·K_CHUNK, (q+1)·K_CHUNK) ∩ [0,K)           (fixed by K, not by the threads)
     *   task q:   pack op(B)[chunk, 0:N] → bp;  P_q = op(A)[0:M, chunk]·bp   (row blocks of MC, all of C)
     *   task t owns row blocks [b0,b1):  P_0 += P_1; P_0 += P_2; …  (chunk order), then the epilogue from P_0
     * </pre>
     * Every element of C is the same sum of the same partials in the same order whichever task computes them, so
     * the result does not depend on the thread count (it does differ in rounding from the unsplit product).
     */
    private static void splitK(Parallel pool, int threads, Layout layout, int M, int N, int K,
                               MemorySegment a, DType aType, int lda,
                               MemorySegment b, DType bType, int ldb,
                               Epilogue out, DType operands) {
        int chunks = (K + K_CHUNK - 1) / K_CHUNK;
        int ncPad = roundUp(N, NR);
        int mPad = roundUp(M, MR);
        int part = mPad * ncPad;
        float[] partials = WORKSPACE.get().partials(chunks * part); // the caller's: it waits while others fill it
        forEach(pool, threads, chunks, q -> {
            int k0 = q * K_CHUNK;
            int kc = Math.min(K_CHUNK, K - k0);
            Workspace ws = WORKSPACE.get();
            MemorySegment aq = a.asSlice((layout.transA() ? (long) k0 * lda : k0) * aType.byteSize());
            MemorySegment bq = b.asSlice((layout.transB() ? k0 : (long) k0 * ldb) * bType.byteSize());
            float[] bp = ws.bp(ncPad * kc);
            Packing.packB(layout.transB(), bq, bType, ldb, kc, KC, 0, N, bp, ncPad, 0, ws.run(runLength(kc, ncPad)),
                    operands);
            for (int ic = 0; ic < M; ic += MC) {
                product(layout.transA(), aq, aType, lda, ic, Math.min(MC, M - ic), kc, bp, ncPad, partials,
                        q * part + ic * ncPad, ws, operands);
            }
        });
        int rowBlocks = (M + MC - 1) / MC; // each block's partial is contiguous: MC·ncPad floats (less for the last)
        int tasks = Math.min(threads, rowBlocks);
        forEach(pool, threads, tasks, t -> {
            int m0 = share(rowBlocks, tasks, t) * MC;
            int m1 = Math.min(M, share(rowBlocks, tasks, t + 1) * MC);
            int from = m0 * ncPad;
            int length = (roundUp(m1, MR) - m0) * ncPad;
            for (int q = 1; q < chunks; q++) {
                addInto(partials, from, partials, q * part + from, length);
            }
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = Math.min(MC, m1 - ic);
                out.store(partials, ic * ncPad, roundUp(mc, MR) * NR, mc, N, ic, 0);
            }
        });
    }

    /** {@code dst[d…d+n) += src[s…s+n)}, element by element (so vector and scalar give the same bits). */
    private static void addInto(float[] dst, int d, float[] src, int s, int n) {
        int i = 0;
        if (!Simd.SCALAR) {
            for (int end = S.loopBound(n); i < end; i += S.length()) {
                FloatVector.fromArray(S, dst, d + i).add(FloatVector.fromArray(S, src, s + i)).intoArray(dst, d + i);
            }
        }
        for (; i < n; i++) {
            dst[d + i] += src[s + i];
        }
    }

    /** {@code pool.forEach}, or a plain loop on the calling thread when the product is too small to share. */
    static void forEach(Parallel pool, int threads, int tasks, IntConsumer body) {
        if (threads == 1) {
            for (int t = 0; t < tasks; t++) {
                body.accept(t);
            }
        } else {
            pool.forEach(tasks, body);
        }
    }

    /**
     * Columns of one packed B block: all of them, unless K·N floats would pass {@link #B_BLOCK_FLOATS} or N would
     * pass {@link #NC_MAX} (which bounds the MC×NC accumulator when K is small). (Blocks of equal width instead of
     * full ones and a narrow last one — gpt2-dinp with 8 MiB blocks: 384 + 384 columns instead of 672 + 96 —
     * measured 4 % slower.)
     */
    static int blockColumns(int n, int K) {
        int byB = B_BLOCK_FLOATS / Math.max(K, 1) / NR * NR;
        return Math.max(NR, Math.min(roundUp(n, NR), Math.min(NC_MAX, byB)));
    }

    /** Floats of the decode buffer the packing needs. */
    static int runLength(int K, int ncPad) {
        return Math.max(Math.max(NR * K, MR * KC), Math.max(SHALLOW_ROWS_MAX, ncPad));
    }

    /** Start of share {@code t} of {@code units} split as evenly as possible over {@code parts}. */
    private static int share(int units, int parts, int t) {
        return (int) ((long) units * t / parts);
    }
}
