package io.accel4j.cpu.ops;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AttentionOps;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;

/**
 * Causal multi-head self-attention, FlashAttention-2 on the CPU: the T×T scores are never stored, only BLOCK×BLOCK
 * tiles (Br = Bc = {@link #BLOCK}) in per-thread scratch ({@link io.accel4j.core.ops.AttentionOps} has the math
 * and shapes: {@code qkv (B,T,3C)}, {@code out (B,T,C)}, {@code lse (B,NH,T)}, {@code hs = C/NH},
 * {@code scale = 1/√hs}).
 *
 * <p><b>Forward</b>, a task per (b, h, group of {@link #GROUP} query blocks), the longest rows first so threads
 * finish together; for each query block i:
 * <pre>
 *   m = −∞, l = 0, O = 0
 *   for key blocks j ≤ i:  Sᵀ = Kⱼ·(scale·Qᵢ)ᵀ (keys × queries; the diagonal block masks key &gt; query with −∞)
 *                          m' = max(m, max_c Sᵀ),  P = exp(Sᵀ − m'),  α = exp(m − m'),
 *                          l = α·l + Σ_c P,  O = α·O + P·Vⱼ,  m = m'
 *   out = O / l,  lse = m + log l
 * </pre>
 * Key blocks above the diagonal are skipped. Holding S key-major makes every softmax step a vector operation
 * across queries (no horizontal reductions); each key block is loaded once per group, not once per query block.
 *
 * <p><b>Backward</b>, a task per (b, h): {@code D_t = dout_t·out_t}; for key blocks j (outer, in groups) and query
 * blocks i ≥ j:
 * <pre>
 *   S = scale·Qᵢ·Kⱼᵀ,  P = exp(S − lseᵢ),  dVⱼ += Pᵀ·dOᵢ,  dP = dOᵢ·Vⱼᵀ,  dS = P∘(dP − Dᵢ),
 *   dQᵢ += scale·dS·Kⱼ (added to dqkv per group),  dKⱼ += scale·dSᵀ·Qᵢ (added after the last i)
 * </pre>
 * A task writes only its head's columns of dqkv, so tasks are independent; nothing is summed across tasks, no
 * lane reduction or transcendental depends on the JIT tier, so the bits are the same on any number of threads.
 * Gradients are added ({@code +=}) to what dqkv holds.
 *
 * <p>The products (two per tile pair forward, five backward) are two register-blocked kernels ({@link Tiles});
 * tiles are zero-padded (hs up to a multiple of NR, T up to a multiple of BLOCK) so they have no edge cases; exp
 * is {@link Softmax#exp} (fma only, within 2 ulp). Measured choices: BLOCK 64 (32, 48, 80, 96 were slower),
 * GROUP 4 (1, 2, 8 slower), MR×NR = 4×16 on AVX2 (5×16 with BLOCK 80 no better). Scratch per thread
 * ({@link #workspaceBytes}, {@link #backwardWorkspaceBytes}): tiles, plus in backward the D vector of one head — O(T), never T×T; kept per
 * thread across calls of one shape ({@link AttentionWorkspace}), so a call allocates nothing once warm.
 *
 * <p>Diagonal blocks skip the register tiles that only the mask touches: score tiles wholly above the diagonal
 * (the mask overwrites them) and, in the products by P or dS, the k range where those are exact zeros. Adding
 * 0·x changes nothing but the sign of an exact-zero sum (and would turn an infinite v of a later key into NaN),
 * so the results are the bits of the full products.
 *
 * <p><b>BF16 operands</b> ({@link AttentionOps}' rounding points, the methods taking a {@link DType}): the tiles of
 * q, k, v and dout are rounded to bf16 as they are loaded (q before it is scaled), P is rounded after the running
 * sum l has taken it and before P·V, out is rounded as it is stored; backward sums D from the rounded dout and out,
 * computes dS from the unrounded P, then rounds P (for dV) and dS (for dQ, dK); dK and dV are complete after a key
 * group and are rounded once as they are added, dQ is summed over every group into a head-wide tile ({@code T·hsP}
 * floats a thread) and rounded once at the end. Rounding is {@link io.accel4j.core.Bf16}'s scalar code, element by
 * element ({@link Tiles#roundBf16}).
 */
public final class FlashAttention {

    private FlashAttention() {}

    /** Rows of the kernel's register tile. */
    static final int MR = 4;
    /** Columns of the kernel's register tile: two vectors. */
    static final int NR = 2 * Simd.lanes();
    /** Blocks and padded head sizes are multiples of this. */
    static final int UNIT = lcm(MR, NR);
    /**
     * Query and key block size Br = Bc, a JIT-time constant (tile strides must be constants for speed); tuning runs
     * may set -Daccel4j.attention.block (rounded up to a multiple of MR and NR).
     */
    static final int BLOCK = roundUp(Math.max(1, Integer.getInteger("accel4j.attention.block", 64)), UNIT);
    /**
     * Query blocks per forward task, and key blocks per backward round, so that each block loaded from qkv serves
     * several (tuning runs may set -Daccel4j.attention.group).
     */
    static final int GROUP = Math.max(1, Integer.getInteger("accel4j.attention.group", 4));

    /** Sizes of one call: head size hs, padded to hsP (a multiple of NR), and nb blocks of BLOCK rows. */
    record Dims(int B, int T, int C, int NH, int hs, int hsP, int nb, float scale) {
        static Dims of(int B, int T, int C, int NH) {
            int hs = C / NH;
            return new Dims(B, T, C, NH, hs, roundUp(hs, NR), (T + BLOCK - 1) / BLOCK, (float) (1 / Math.sqrt(hs)));
        }

        /** Floats of a block's rows as BLK-column chunks ({@link Tiles#loadChunks}). */
        int chunks() {
            return roundUp(hsP, BLOCK) * BLOCK;
        }

        /** Query blocks per forward task: GROUP, or all of them when T is shorter. */
        int group() {
            return Math.min(GROUP, nb);
        }

        /** Forward tasks per head. */
        int groups() {
            return (nb + group() - 1) / group();
        }

        /** group() × (Qᵀ panels, O, m, l); K chunks, V panels, the score tile, alpha, m'. */
        long forwardSlotFloats() {
            return group() * (2L * BLOCK * hsP + 2L * BLOCK) + chunks() + (long) BLOCK * hsP + (long) BLOCK * BLOCK
                    + 2L * BLOCK;
        }

        /** group() × (Kᵀ, Vᵀ, K panels, dK, dV); Q, dO panels, dQ; Q, dO chunks; P, dS; a block's lse; a head's D. */
        long backwardSlotFloats() {
            return (5L * group() + 3) * BLOCK * hsP + 2L * chunks() + 2L * BLOCK * BLOCK + BLOCK + (long) nb * BLOCK;
        }
    }

    /**
     * Scratch bytes {@link #forward} takes (kept per thread for the next call of the shape): tiles per worker
     * thread; it grows with T only up to T = GROUP·BLOCK (256), then stays constant.
     */
    public static long workspaceBytes(int B, int T, int C, int NH, int threads) {
        io.accel4j.cpu.Check.positive("threads", threads);
        AttentionArgs.headSize(B, T, C, NH);
        Dims d = Dims.of(B, T, C, NH);
        return AttentionArgs.workers(threads, (long) B * NH * d.groups()) * d.forwardSlotFloats() * Float.BYTES;
    }

    /** Scratch bytes {@link #backward} takes (kept per thread): per worker, tiles and one head's D (linear in T). */
    public static long backwardWorkspaceBytes(int B, int T, int C, int NH, int threads) {
        return backwardWorkspaceBytes(B, T, C, NH, threads, DType.FP32);
    }

    /** {@link #backwardWorkspaceBytes(int, int, int, int, int)} with {@code operands}: BF16 adds a head's dQ. */
    public static long backwardWorkspaceBytes(int B, int T, int C, int NH, int threads, DType operands) {
        io.accel4j.cpu.Check.positive("threads", threads);
        AttentionArgs.headSize(B, T, C, NH);
        boolean bf16 = AttentionOps.checkOperands(operands) == DType.BF16;
        Dims d = Dims.of(B, T, C, NH);
        long slot = d.backwardSlotFloats() + (bf16 ? (long) d.nb() * BLOCK * d.hsP() : 0);
        return AttentionArgs.workers(threads, (long) B * NH) * slot * Float.BYTES;
    }

    /** Writes {@code out (B,T,C)} and {@code lse (B,NH,T)} from {@code qkv (B,T,3C)}. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                               int B, int T, int C, int NH) {
        forward(pool, out, lse, qkv, B, T, C, NH, DType.FP32);
    }

    /** {@link #forward} with products of {@code operands} precision (FP32 or BF16, {@link AttentionOps}). */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                               int B, int T, int C, int NH, DType operands) {
        forward(pool, out, lse, qkv, B, T, C, NH, operands, AttentionWorkspace.PER_THREAD);
    }

    /** {@link #forward}, taking every scratch array from {@code scratch} (tests count what it hands out). */
    static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                        int B, int T, int C, int NH, IntFunction<float[]> scratch) {
        forward(pool, out, lse, qkv, B, T, C, NH, DType.FP32, scratch);
    }

    /** {@link #forward}, with {@code operands}, taking every scratch array from {@code scratch}. */
    static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                        int B, int T, int C, int NH, DType operands, IntFunction<float[]> scratchSource) {
        boolean bf16 = AttentionOps.checkOperands(operands) == DType.BF16;
        AttentionArgs.headSize(B, T, C, NH);
        AttentionArgs.forward(pool, out, lse, qkv, B, T, C, NH);
        Dims d = Dims.of(B, T, C, NH);
        int heads = B * NH;
        int items = Math.toIntExact((long) heads * d.groups());
        AtomicInteger next = new AtomicInteger();
        List<Object> key = List.of(d, bf16);
        pool.forEach(AttentionArgs.workers(pool.threads(), items), w -> {
            IntFunction<float[]> scratch = AttentionWorkspace.of(scratchSource, AttentionWorkspace.FORWARD, key);
            int tile = BLOCK * d.hsP();
            int n = d.group();
            ForwardScratch s = new ForwardScratch(new float[n][], new float[n][], new float[n][], new float[n][],
                    scratch.apply(d.chunks()), scratch.apply(tile), scratch.apply(BLOCK * BLOCK),
                    scratch.apply(BLOCK), scratch.apply(BLOCK));
            for (int g = 0; g < n; g++) {
                s.qt()[g] = scratch.apply(tile);
                s.o()[g] = scratch.apply(tile);
                s.m()[g] = scratch.apply(BLOCK);
                s.l()[g] = scratch.apply(BLOCK);
            }
            for (int item; (item = next.getAndIncrement()) < items; ) {
                int g = d.groups() - 1 - item / heads; // the longest rows first
                forwardGroup(d, out, lse, qkv, item % heads / NH, item % NH, g, s, bf16);
            }
        });
    }

    /**
     * One thread's forward tiles: per query block of its group Qᵀ panels, O, m, l; K (chunks) and V (panels) of
     * the key block in hand, the score tile, alpha and m'.
     */
    private record ForwardScratch(float[][] qt, float[][] o, float[][] m, float[][] l, float[] k, float[] v,
                                  float[] st, float[] alpha, float[] mx) {}

    /**
     * Query blocks {@code g·group …} of one head: each key block is loaded once and used by every query block
     * of the group at or below the diagonal (loading it from qkv, out of cache, took a quarter of the time when
     * every query block loaded its own).
     */
    private static void forwardGroup(Dims d, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                                     int b, int h, int g, ForwardScratch s, boolean bf16) {
        int T = d.T(), C = d.C(), hs = d.hs(), hsP = d.hsP();
        long qkvRow = 3L * C * Float.BYTES;
        long head = ((long) b * T * 3 * C + (long) h * hs) * Float.BYTES;
        int i0 = g * d.group(), i1 = Math.min(d.nb(), i0 + d.group());
        float[] k = s.k(), v = s.v(), st = s.st(), alpha = s.alpha(), mx = s.mx();
        for (int i = i0; i < i1; i++) {
            int t0 = i * BLOCK;
            Tiles.loadPanelsT(s.qt()[i - i0], hsP, qkv, head + t0 * qkvRow, qkvRow, Math.min(BLOCK, T - t0), hs,
                    bf16 ? 1f : d.scale());
            if (bf16) {
                Tiles.roundBf16(s.qt()[i - i0], d.scale());                      // scale·bf16(q)
            }
            Arrays.fill(s.m()[i - i0], Float.NEGATIVE_INFINITY);
            Arrays.fill(s.l()[i - i0], 0f);
            Arrays.fill(s.o()[i - i0], 0f);
        }
        for (int j = 0; j < i1; j++) {
            long kAt = head + j * BLOCK * qkvRow + (long) C * Float.BYTES;
            int keys = Math.min(BLOCK, T - j * BLOCK);
            Tiles.loadChunks(k, qkv, kAt, qkvRow, keys, hs, 1f);
            Tiles.loadPanels(v, qkv, kAt + (long) C * Float.BYTES, qkvRow, keys, hs, 1f);
            if (bf16) {
                Tiles.roundBf16(k, 1f);
                Tiles.roundBf16(v, 1f);
            }
            for (int i = Math.max(j, i0); i < i1; i++) {
                float[] o = s.o()[i - i0], m = s.m()[i - i0], l = s.l()[i - i0];
                Arrays.fill(st, 0f);
                boolean diag = j == i;
                Tiles.mmChunks(BLOCK, hsP, k, s.qt()[i - i0], st, BLOCK,        // Sᵀ[c][r] = k_c·scale·q_r
                        diag ? Tiles.M_TO_COL : Tiles.FULL);
                if (diag) {
                    Softmax.maskAbove(st, true);
                }
                Softmax.columnMax(st, m, mx);                                   // m' = max(m, max_c S)
                Softmax.expShift(st, BLOCK, mx, false);                         // P = exp(S − m')
                System.arraycopy(m, 0, alpha, 0, BLOCK);
                Softmax.expShift(alpha, 1, mx, false);                          // alpha = exp(m − m')
                Softmax.columnSum(st, alpha, l);                                // l = alpha·l + Σ_c P
                if (bf16) {
                    Tiles.roundBf16(st, 1f);                                    // bf16(P) for P·V only
                }
                System.arraycopy(mx, 0, m, 0, BLOCK);
                Softmax.scaleRows(o, hsP, alpha);
                Tiles.mmColA(hsP, BLOCK, st, v, o, hsP,                         // O[r] += Σ_c P[r][c]·v_c
                        diag ? Tiles.K_TO_ROW : Tiles.FULL);
            }
        }
        long outRow = (long) C * Float.BYTES;
        for (int i = i0; i < i1; i++) {
            int t0 = i * BLOCK, rows = Math.min(BLOCK, T - t0);
            float[] m = s.m()[i - i0], l = s.l()[i - i0];
            for (int r = 0; r < rows; r++) {
                alpha[r] = 1f / l[r];
            }
            long outAt = ((long) b * T * C + (long) t0 * C + (long) h * hs) * Float.BYTES;
            Tiles.storeRows(out, outAt, outRow, s.o()[i - i0], hsP, rows, hs, alpha);
            if (bf16) {
                Tiles.roundRowsBf16(out, outAt, outRow, rows, hs);
            }
            long lseAt = ((long) (b * d.NH() + h) * T + t0) * Float.BYTES;
            for (int r = 0; r < rows; r++) {
                lse.set(Tiles.F32, lseAt + (long) r * Float.BYTES, m[r] + (float) Math.log(l[r]));
            }
        }
    }

    /** {@code dqkv (B,T,3C) +=} the gradient of {@code Σ dout·out}, from the forward's {@code out} and {@code lse}. */
    public static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                                MemorySegment out, MemorySegment lse, int B, int T, int C, int NH) {
        backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, DType.FP32);
    }

    /** {@link #backward} with products of {@code operands} precision (FP32 or BF16, {@link AttentionOps}). */
    public static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                                MemorySegment out, MemorySegment lse, int B, int T, int C, int NH, DType operands) {
        backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, operands, AttentionWorkspace.PER_THREAD);
    }

    /** {@link #backward}, taking every scratch array from {@code scratch}. */
    static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                         MemorySegment out, MemorySegment lse, int B, int T, int C, int NH,
                         IntFunction<float[]> scratch) {
        backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, DType.FP32, scratch);
    }

    /** {@link #backward}, with {@code operands}, taking every scratch array from {@code scratch}. */
    static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                         MemorySegment out, MemorySegment lse, int B, int T, int C, int NH, DType operands,
                         IntFunction<float[]> scratchSource) {
        boolean bf16 = AttentionOps.checkOperands(operands) == DType.BF16;
        AttentionArgs.headSize(B, T, C, NH);
        AttentionArgs.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
        Dims d = Dims.of(B, T, C, NH);
        int heads = B * NH;
        AtomicInteger next = new AtomicInteger();
        List<Object> key = List.of(d, bf16);
        pool.forEach(AttentionArgs.workers(pool.threads(), heads), w -> {
            IntFunction<float[]> scratch = AttentionWorkspace.of(scratchSource, AttentionWorkspace.BACKWARD, key);
            int t = BLOCK * d.hsP(), ch = d.chunks(), bb = BLOCK * BLOCK, n = d.group();
            BackwardScratch s = new BackwardScratch(new float[n][], new float[n][], new float[n][], new float[n][],
                    new float[n][], scratch.apply(ch), scratch.apply(t), scratch.apply(ch), scratch.apply(t),
                    scratch.apply(t), scratch.apply(bb), scratch.apply(bb), scratch.apply(BLOCK),
                    scratch.apply(d.nb() * BLOCK), bf16 ? scratch.apply(d.nb() * BLOCK * d.hsP()) : null);
            for (int g = 0; g < n; g++) {
                s.kt()[g] = scratch.apply(t);
                s.vt()[g] = scratch.apply(t);
                s.k()[g] = scratch.apply(t);
                s.dk()[g] = scratch.apply(t);
                s.dv()[g] = scratch.apply(t);
            }
            for (int item; (item = next.getAndIncrement()) < heads; ) {
                backwardHead(d, dqkv, dout, qkv, out, lse, item / NH, item % NH, s, bf16);
            }
        });
    }

    /**
     * One thread's backward tiles. Per key block of a group: K and V as Bᵀ panels (for S and dP), K as B panels
     * (for dQ), dK, dV. Of the query block in hand: Q and dO as A chunks (for S and dP) and as B panels (for dK
     * and dV), dQ; the query-major tiles P and dS; the block's lse; D of the whole head; with BF16 operands the
     * head's whole dQ (null otherwise), rounded once when complete.
     */
    private record BackwardScratch(float[][] kt, float[][] vt, float[][] k, float[][] dk, float[][] dv, float[] qa,
                                   float[] q, float[] dOa, float[] dO, float[] dq, float[] p, float[] ds,
                                   float[] lseI, float[] dRow, float[] dqHead) {}

    /**
     * One head, key blocks in groups: each query block is loaded once per group and serves every key block of
     * it at or above the diagonal; its dQ is added to dqkv once per group.
     */
    private static void backwardHead(Dims d, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                                     MemorySegment out, MemorySegment lse, int b, int h, BackwardScratch s,
                                     boolean bf16) {
        int T = d.T(), C = d.C(), hs = d.hs(), hsP = d.hsP(), nb = d.nb();
        long qkvRow = 3L * C * Float.BYTES, outRow = (long) C * Float.BYTES;
        long head = ((long) b * T * 3 * C + (long) h * hs) * Float.BYTES;
        long outHead = ((long) b * T * C + (long) h * hs) * Float.BYTES;
        long lseHead = (long) (b * d.NH() + h) * T * Float.BYTES;
        float[] qa = s.qa(), q = s.q(), dOa = s.dOa(), dO = s.dO(), dq = s.dq(), p = s.p(), ds = s.ds();
        float[] lseI = s.lseI(), dRow = s.dRow();
        if (bf16) {
            Tiles.rowDotsBf16(dRow, dout, out, outHead, outRow, T, hs);         // D_t = bf16(dout_t)·bf16(out_t)
            Arrays.fill(s.dqHead(), 0f);
        } else {
            Tiles.rowDots(dRow, dout, out, outHead, outRow, T, hs, lseI);       // D_t = dout_t·out_t (lseI: lanes)
        }
        Arrays.fill(dRow, T, nb * BLOCK, 0f);
        for (int j0 = 0; j0 < nb; j0 += d.group()) {
            int j1 = Math.min(nb, j0 + d.group());
            for (int j = j0; j < j1; j++) {
                int keys = Math.min(BLOCK, T - j * BLOCK);
                long kAt = head + j * BLOCK * qkvRow + (long) C * Float.BYTES, vAt = kAt + (long) C * Float.BYTES;
                Tiles.loadPanelsT(s.kt()[j - j0], hsP, qkv, kAt, qkvRow, keys, hs, 1f);
                Tiles.loadPanelsT(s.vt()[j - j0], hsP, qkv, vAt, qkvRow, keys, hs, 1f);
                Tiles.loadPanels(s.k()[j - j0], qkv, kAt, qkvRow, keys, hs, 1f);
                if (bf16) {
                    Tiles.roundBf16(s.kt()[j - j0], 1f);
                    Tiles.roundBf16(s.vt()[j - j0], 1f);
                    Tiles.roundBf16(s.k()[j - j0], 1f);
                }
                Arrays.fill(s.dk()[j - j0], 0f);
                Arrays.fill(s.dv()[j - j0], 0f);
            }
            for (int i = j0; i < nb; i++) {
                int t0 = i * BLOCK, rows = Math.min(BLOCK, T - t0);
                long qAt = head + t0 * qkvRow, dAt = outHead + t0 * outRow;
                float qMul = bf16 ? 1f : d.scale();
                Tiles.loadChunks(qa, qkv, qAt, qkvRow, rows, hs, qMul);
                Tiles.loadPanels(q, qkv, qAt, qkvRow, rows, hs, qMul);
                Tiles.loadChunks(dOa, dout, dAt, outRow, rows, hs, 1f);
                Tiles.loadPanels(dO, dout, dAt, outRow, rows, hs, 1f);
                if (bf16) {
                    Tiles.roundBf16(qa, d.scale());                             // scale·bf16(q)
                    Tiles.roundBf16(q, d.scale());
                    Tiles.roundBf16(dOa, 1f);
                    Tiles.roundBf16(dO, 1f);
                }
                for (int r = 0; r < BLOCK; r++) {
                    lseI[r] = r < rows ? lse.get(Tiles.F32, lseHead + (long) (t0 + r) * Float.BYTES) : 0f;
                }
                Arrays.fill(dq, 0f);
                for (int j = j0; j < Math.min(j1, i + 1); j++) {
                    float[] dk = s.dk()[j - j0], dv = s.dv()[j - j0];
                    boolean diag = i == j;
                    int scores = diag ? Tiles.M_FROM_COL : Tiles.FULL;
                    Arrays.fill(p, 0f);
                    Tiles.mmChunks(BLOCK, hsP, qa, s.kt()[j - j0], p, BLOCK, scores); // S[r][c] = scale·q_r·k_c
                    if (diag) {
                        Softmax.maskAbove(p, false);
                    }
                    Softmax.expShift(p, BLOCK, lseI, true);                     // P = exp(S − lse)
                    Arrays.fill(ds, 0f);
                    Tiles.mmChunks(BLOCK, hsP, dOa, s.vt()[j - j0], ds, BLOCK, scores); // dP[r][c] = dO_r·v_c
                    Softmax.softmaxGrad(ds, p, dRow, t0);                       // dS = P∘(dP − D)
                    if (bf16) {
                        Tiles.roundBf16(p, 1f);                                 // bf16(P), bf16(dS) for the products
                        Tiles.roundBf16(ds, 1f);
                    }
                    int byKey = diag ? Tiles.K_FROM_ROW : Tiles.FULL;           // P, dS are 0 for key c > query r
                    Tiles.mmColA(hsP, BLOCK, p, dO, dv, hsP, byKey);            // dV[c] += Σ_r P[r][c]·dO_r
                    Tiles.mmRowA(hsP, BLOCK, ds, 0, s.k()[j - j0], 0, BLOCK * NR, dq, hsP, // dQ[r] += Σ_c dS·k_c
                            diag ? Tiles.K_TO_ROW : Tiles.FULL);
                    Tiles.mmColA(hsP, BLOCK, ds, q, dk, hsP, byKey);            // dK[c] += Σ_r dS·scale·q_r
                }
                if (bf16) {
                    Tiles.addTile(s.dqHead(), i * BLOCK * hsP, dq);              // the whole dQ first
                } else {
                    Tiles.addRows(dqkv, qAt, qkvRow, dq, hsP, rows, hs, d.scale());
                }
            }
            for (int j = j0; j < j1; j++) {
                int keys = Math.min(BLOCK, T - j * BLOCK);
                long kAt = head + j * BLOCK * qkvRow + (long) C * Float.BYTES, vAt = kAt + (long) C * Float.BYTES;
                if (bf16) {
                    Tiles.addRowsBf16(dqkv, kAt, qkvRow, s.dk()[j - j0], 0, hsP, keys, hs, 1f);
                    Tiles.addRowsBf16(dqkv, vAt, qkvRow, s.dv()[j - j0], 0, hsP, keys, hs, 1f);
                } else {
                    Tiles.addRows(dqkv, kAt, qkvRow, s.dk()[j - j0], hsP, keys, hs, 1f);
                    Tiles.addRows(dqkv, vAt, qkvRow, s.dv()[j - j0], hsP, keys, hs, 1f);
                }
            }
        }
        if (bf16) {
            for (int i = 0; i < nb; i++) {
                int t0 = i * BLOCK;
                Tiles.addRowsBf16(dqkv, head + t0 * qkvRow, qkvRow, s.dqHead(), i * BLOCK * hsP, hsP,
                        Math.min(BLOCK, T - t0), hs, d.scale());
            }
        }
    }

    static int roundUp(int x, int unit) {
        return (x + unit - 1) / unit * unit;
    }

    private static int lcm(int a, int b) {
        int x = a, y = b;
        while (y != 0) {
            int t = x % y;
            x = y;
            y = t;
        }
        return a / x * b;
    }
}
