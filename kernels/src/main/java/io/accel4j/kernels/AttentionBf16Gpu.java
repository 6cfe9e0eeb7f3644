package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AttentionOps;
import io.accel4j.core.ops.OpChecks;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.TensorMap;
import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Multi-head self-attention in bf16 on the GPU's tensor cores (attention_bf16.cu: FlashAttention-2 style, wmma
 * m16n16k16, fp32 softmax statistics and accumulators), causal or not, head size 64 or 128.
 *
 * <p>The math is {@link io.accel4j.core.ops.AttentionOps}'s with the mask made optional: with {@code scale = 1/√hs}
 * (hs = C/NH), {@code s[t,u] = scale·q_t·k_u} for every key u (causal: {@code u ≤ t}), {@code lse[t] = log Σ_u
 * exp(s[t,u])}, {@code out[t] = Σ_u exp(s[t,u] − lse[t])·v_u}; backward gives the gradient of {@code Σ dout·out}.
 * Shapes and dtypes, in argument order:
 * <pre>
 *   qkv  (B,T,3C) bf16   Q in columns [0,C), K in [C,2C), V in [2C,3C); head h in columns h·hs … (h+1)·hs of each
 *   out  (B,T,C)  bf16   written by forward
 *   lse  (B,NH,T) fp32   written by forward (natural log, scale included), read by backward
 *   dout (B,T,C)  bf16
 *   dqkv (B,T,3C) bf16   WRITTEN by backward (not added to, unlike AttentionOps: a bf16 sum would round twice)
 * </pre>
 * Every segment is a device view ({@link GpuOps#device}), qkv and dout 16-byte aligned; work is queued on the
 * default stream, in call order. Deterministic: no atomics, fixed summation orders.
 *
 * <p>Three forward kernels ({@link ForwardKernel}): on a device of compute capability 9.0 (where {@link GpuOps}
 * loads the sm_90a PTX) {@link #forward} runs attention_wgmma.cu's attention_wgmma_forward (Hopper's warpgroup MMA,
 * 128 query rows a block), else attention_bf16.cu's (wmma); the choice is logged once. attention_wgmma.cu's
 * attention_wgmma_tma_forward ({@link ForwardKernel#WGMMA_TMA}: TMA loads, a producer warpgroup, mbarriers) runs
 * only when asked for by name, until a Hopper benchmark (AttentionCases) shows which of the two is faster, and not at
 * all with {@code -Daccel4j.attention.tma=false} ({@link #TMA_PROPERTY}: the GPU check runs it in a process of its
 * own, so that a hang on its first hardware run costs only its own figures). The backward is attention_bf16.cu's
 * everywhere: it reads only out and lse, which every forward writes to the same contract.
 * <p>{@link #forwardFp32} and {@link #backwardFp32} are {@link io.accel4j.core.ops.AttentionOps}' causal attention
 * with BF16 operands on fp32 buffers ({@link GpuOps} runs them): the fp32 inputs are rounded into bf16 scratch by
 * cast.cu (bit-identical to {@link io.accel4j.core.Bf16#fromFloat}), the kernels above run on the copies, and the
 * results are widened (exactly) into the fp32 buffers — out written, dqkv added to. The kernels' own roundings
 * (P and dS to bf16 before their second product, the bf16 results) are the contract's rounding points.
 */
public final class AttentionBf16Gpu implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(AttentionBf16Gpu.class);
    /** Whether the forward kernel choice has been logged (once a JVM: every instance of a process makes the same). */
    private static final AtomicBoolean LOGGED = new AtomicBoolean();

    /** The forward kernels. */
    public enum ForwardKernel {
        /** attention_bf16_forward: wmma m16n16k16, any device of compute capability 8.0 or later. */
        WMMA,
        /** attention_wgmma_forward: wgmma m64nNk16, compute capability 9.0 only (sm_90a PTX). */
        WGMMA,
        /**
         * attention_wgmma_tma_forward: WGMMA's math with its K/V tiles loaded by TMA from a producer warpgroup into an
         * mbarrier-pipelined ring (FlashAttention-3's structure), compute capability 9.0 only. Selectable for tests
         * and benchmarks; not the default until a Hopper run shows it faster than WGMMA.
         */
        WGMMA_TMA
    }

    /** Threads of every tile kernel (4 warps). */
    private static final int THREADS = 128;
    /** Query rows per block of attention_bf16_forward (AB_FWD_ROWS). */
    private static final int FORWARD_ROWS = 64;
    /** Query rows per block of attention_bf16_backward_dq, keys per block of …_dkdv (AB_BWD_ROWS). */
    private static final int BACKWARD_ROWS = 32;
    /** Key tile of the forward and dQ kernels, query tile of dK/dV (AB_KEYS). */
    private static final int KEYS = 32;
    /** Threads of attention_bf16_backward_d: a warp per (b, t, h). */
    private static final int D_THREADS = 256;
    /** Threads of attention_wgmma_forward: two warpgroups (AW_THREADS). */
    private static final int WGMMA_THREADS = 256;
    /** Query rows per block of attention_wgmma_forward (AW_ROWS), and its key tile (AW_KEYS). */
    private static final int WGMMA_ROWS = 128;
    /** Threads of attention_wgmma_tma_forward: two consumer warpgroups and the producer's (AW_TMA_THREADS). */
    private static final int WGMMA_TMA_THREADS = 384;
    /** Its K and V ring depth (AW_STAGES) and the shared memory of its barriers (AW_TMA_BARRIER_BYTES). */
    private static final int WGMMA_TMA_STAGES = 2, WGMMA_TMA_BARRIER_BYTES = 128;
    /** Columns of a TMA box (AW_TMA_BOX_COLS): one 128-byte row of the 128-byte swizzle. */
    private static final int TMA_BOX_COLS = 64;

    private final GpuOps ops;
    /** attention_bf16_backward_d's D (B,NH,T) fp32, grown to the largest call so far. */
    private final ScratchBuffer d;
    /** The device's compute capability (major·10 + minor). */
    private final int computeCapability;
    /** What {@link #forward} runs. */
    private final ForwardKernel forwardKernel;
    /** Whether attention_wgmma_forward may take its (over 48 KiB) shared memory yet: set on its first launch. */
    private boolean wgmmaOptedIn;
    /** The same for attention_wgmma_tma_forward. */
    private boolean wgmmaTmaOptedIn;
    /** The fp32 methods' bf16 copies of qkv, out and dout, and the bf16 dqkv, each grown to the largest call. */
    private final ScratchBuffer qkv16, out16, dout16, dqkv16;

    /** Launches on the kernels {@code ops} loaded (which must stay open while this is used; closing this first). */
    public AttentionBf16Gpu(GpuOps ops) {
        this.ops = Objects.requireNonNull(ops, "ops");
        this.computeCapability = ops.context().computeCapability();
        this.forwardKernel = forwardKernelFor(computeCapability);
        this.d = ScratchBuffer.of(ops.context());
        this.qkv16 = ScratchBuffer.of(ops.context());
        this.out16 = ScratchBuffer.of(ops.context());
        this.dout16 = ScratchBuffer.of(ops.context());
        this.dqkv16 = ScratchBuffer.of(ops.context());
        if (LOGGED.compareAndSet(false, true)) {
            LOG.info("bf16 attention: {}", describe());
        }
    }

    /**
     * The forward kernel on a device of compute capability {@code major·10 + minor}: WGMMA where {@link GpuOps} loads
     * the sm_90a PTX ({@link Kernels#ptxArch}: 9.0 only), else WMMA.
     */
    public static ForwardKernel forwardKernelFor(int computeCapability) {
        return Kernels.ptxArch(computeCapability).equals(Kernels.HOPPER_ARCH) ? ForwardKernel.WGMMA
                : ForwardKernel.WMMA;
    }

    /**
     * Whether {@code kernel} runs on this device: WGMMA and WGMMA_TMA on compute capability 9.0 only, where the
     * sm_90a PTX is; WGMMA_TMA not when {@link #TMA_PROPERTY} is {@code false}.
     */
    public boolean supports(ForwardKernel kernel) {
        return unsupported(kernel) == null;
    }

    /** Why {@code kernel} does not run here (see {@link #supports}), or null when it does. */
    public String unsupported(ForwardKernel kernel) {
        if (kernel == ForwardKernel.WMMA) {
            return null;
        }
        if (forwardKernelFor(computeCapability) != ForwardKernel.WGMMA) {
            return "the wgmma attention forwards need compute capability 9.0 (sm_90a PTX), this device is "
                    + computeCapability / 10 + "." + computeCapability % 10;
        }
        if (kernel == ForwardKernel.WGMMA_TMA && !tmaEnabled()) {
            return "the TMA attention forward is disabled by -D" + TMA_PROPERTY + "=false";
        }
        return null;
    }

    /** The system property that disables {@link ForwardKernel#WGMMA_TMA} when {@code false} (default: enabled). */
    public static final String TMA_PROPERTY = "accel4j.attention.tma";

    private static boolean tmaEnabled() {
        return !"false".equalsIgnoreCase(System.getProperty(TMA_PROPERTY, "true").strip());
    }

    /** The kernel {@link #forward} runs: {@link ForwardKernel#WGMMA} where supported, else WMMA. */
    public ForwardKernel forwardKernel() {
        return forwardKernel;
    }

    /** One line: which forward and backward kernels run, and why. */
    public String describe() {
        String cc = computeCapability / 10 + "." + computeCapability % 10;
        return forwardKernel == ForwardKernel.WGMMA
                ? "forward attention_wgmma_forward (wgmma, sm_90a, compute capability " + cc + "), backward wmma"
                : "forward and backward wmma (attention_bf16.cu; the wgmma forward needs compute capability 9.0, "
                        + "this device is " + cc + ")";
    }

    /**
     * Dynamic shared memory of attention_bf16_forward: 128 rows of hs + 8 bf16 (Q 64, K 32, V 32) and each warp's
     * 16×36 fp32 S and 16×40 bf16 P.
     */
    static int forwardSharedBytes(int hs) {
        return 128 * (hs + 8) * 2 + 4 * 16 * (KEYS + 4) * 4 + 4 * 16 * (KEYS + 8) * 2;
    }

    /**
     * Dynamic shared memory of attention_wgmma_forward: 1 KiB of slack (its swizzled tiles start on a 1024-byte
     * boundary) and six 128-row tiles of hs bf16 (Q, K twice, V three times): 193 KiB at hs 128, 97 KiB at 64.
     */
    static int wgmmaSharedBytes(int hs) {
        return 1024 + 6 * WGMMA_ROWS * hs * 2;
    }

    /**
     * Dynamic shared memory of attention_wgmma_tma_forward: 1 KiB of slack, Q and two stages each of K and V (128
     * rows of hs bf16 each), 128 bytes of mbarriers: 161.1 KiB at hs 128, 81.1 KiB at 64.
     */
    static int wgmmaTmaSharedBytes(int hs) {
        return 1024 + (1 + 2 * WGMMA_TMA_STAGES) * WGMMA_ROWS * hs * 2 + WGMMA_TMA_BARRIER_BYTES;
    }

    /** Dynamic shared memory of the dQ and dK/dV kernels: 4·32 rows of hs + 8 bf16, 2·32×36 fp32, 2·32×40 bf16. */
    static int backwardSharedBytes(int hs) {
        return 4 * 32 * (hs + 8) * 2 + 2 * 32 * (KEYS + 4) * 4 + 2 * 32 * (KEYS + 8) * 2;
    }

    /**
     * Writes {@code out (B,T,C)} bf16 and {@code lse (B,NH,T)} fp32 from {@code qkv (B,T,3C)} bf16, with
     * {@link #forwardKernel()}.
     */
    public void forward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                        boolean causal) {
        forward(forwardKernel, out, lse, qkv, B, T, C, NH, causal);
    }

    /**
     * {@link #forward} with the given kernel (for tests and benchmarks: both write the same results to within bf16
     * rounding).
     *
     * @throws IllegalStateException if this device does not {@link #supports support} {@code kernel}
     */
    public void forward(ForwardKernel kernel, MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T,
                        int C, int NH, boolean causal) {
        Objects.requireNonNull(kernel, "kernel");
        int hs = headSize(B, T, C, NH);
        long bt = (long) B * T;
        bf16s("out", out, bt * C); OpChecks.floats("lse", lse, (long) B * NH * T); bf16s("qkv", qkv, bt * 3 * C);
        aligned("qkv", qkv);
        if (kernel == ForwardKernel.WMMA) {
            launch(Kernels.ATTENTION_BF16_FORWARD, new Dim(tiles(T, FORWARD_ROWS), NH, B), forwardSharedBytes(hs),
                    out, lse, qkv, B, T, C, NH, scale(hs), causal ? 1 : 0);
            return;
        }
        String why = unsupported(kernel);
        if (why != null) {
            throw new IllegalStateException(why);
        }
        if (out.address() % 4 != 0) {  // it stores out two bf16 at a time
            throw new IllegalArgumentException("out must be 4-byte aligned for the wgmma forward, its address is 0x"
                    + Long.toHexString(out.address()));
        }
        if (kernel == ForwardKernel.WGMMA_TMA) {
            forwardTma(out, lse, qkv, B, T, C, NH, hs, causal);
            return;
        }
        CudaKernel k = ops.kernel(Kernels.ATTENTION_WGMMA_FORWARD);
        if (!wgmmaOptedIn) {
            k.setMaxDynamicSharedBytes(wgmmaSharedBytes(128));
            wgmmaOptedIn = true;
        }
        Kernels.ATTENTION_WGMMA_FORWARD.launch(k, new Dim(tiles(T, WGMMA_ROWS), NH, B), Dim.of(WGMMA_THREADS),
                wgmmaSharedBytes(hs), null, out, lse, qkv, B, T, C, NH, scale(hs), causal ? 1 : 0);
    }

    /**
     * attention_wgmma_tma_forward: its tensor map views qkv as a (3C, T, B) bf16 tensor (innermost first; row stride
     * 3C·2 bytes, batch stride T·3C·2), boxes of 64 columns × 128 rows × 1 batch in the 128-byte swizzle its wgmma
     * descriptors declare, rows past T zero-filled (encoded per call: it holds qkv's address; the launch copies it).
     */
    private void forwardTma(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                            int hs, boolean causal) {
        CudaKernel k = ops.kernel(Kernels.ATTENTION_WGMMA_TMA_FORWARD);
        if (!wgmmaTmaOptedIn) {
            k.setMaxDynamicSharedBytes(wgmmaTmaSharedBytes(128));
            wgmmaTmaOptedIn = true;
        }
        try (Arena arena = Arena.ofConfined()) {
            long row = 3L * C * 2;
            TensorMap map = TensorMap.bf16Tiled(ops.context(), arena, qkv.address(), new long[] {3L * C, T, B},
                    new long[] {row, row * T}, new int[] {TMA_BOX_COLS, WGMMA_ROWS, 1},
                    cuda_h.CU_TENSOR_MAP_SWIZZLE_128B);
            Kernels.ATTENTION_WGMMA_TMA_FORWARD.launch(k, new Dim(tiles(T, WGMMA_ROWS), NH, B),
                    Dim.of(WGMMA_TMA_THREADS), wgmmaTmaSharedBytes(hs), null, out, lse, map, B, T, C, NH, scale(hs),
                    causal ? 1 : 0);
        }
    }

    /**
     * Writes {@code dqkv (B,T,3C)} bf16, the gradient of {@code Σ dout·out}, from the forward's {@code out} and
     * {@code lse}: D = rowsum(dout∘out) into a scratch buffer of this object, then dK, dV (a block per 32 keys) and
     * dQ (a block per 32 queries, a pass of its own so that no element is summed with atomics); both recompute P
     * from lse and write disjoint columns.
     */
    public void backward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                         MemorySegment lse, int B, int T, int C, int NH, boolean causal) {
        int hs = headSize(B, T, C, NH);
        long bt = (long) B * T, nLse = (long) B * NH * T;
        bf16s("dqkv", dqkv, bt * 3 * C); bf16s("dout", dout, bt * C); bf16s("qkv", qkv, bt * 3 * C);
        bf16s("out", out, bt * C); OpChecks.floats("lse", lse, nLse);
        aligned("qkv", qkv); aligned("dout", dout);
        MemorySegment dev = d.view(4 * nLse);
        int warps = D_THREADS / 32;
        Kernels.ATTENTION_BF16_BACKWARD_D.launch(ops.kernel(Kernels.ATTENTION_BF16_BACKWARD_D),
                Dim.of(Math.toIntExact((nLse + warps - 1) / warps)), Dim.of(D_THREADS), 0, null,
                dev, dout, out, B, T, C, NH);
        int smem = backwardSharedBytes(hs);
        Dim grid = new Dim(tiles(T, BACKWARD_ROWS), NH, B);
        float scale = scale(hs);
        int mask = causal ? 1 : 0;
        launch(Kernels.ATTENTION_BF16_BACKWARD_DKDV, grid, smem, dqkv, dout, qkv, lse, dev, B, T, C, NH, scale, mask);
        launch(Kernels.ATTENTION_BF16_BACKWARD_DQ, grid, smem, dqkv, dout, qkv, lse, dev, B, T, C, NH, scale, mask);
    }

    /**
     * Causal {@code out (B,T,C)} fp32 (bf16 values) and {@code lse (B,NH,T)} from {@code qkv (B,T,3C)} fp32, with
     * BF16 operands: qkv cast to bf16 into scratch, {@link #forward}, out widened into the fp32 buffer.
     */
    public void forwardFp32(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH) {
        limits(AttentionOps.checkForward(out, lse, qkv, B, T, C, NH), C, NH, B);
        long btc = (long) B * T * C;
        MemorySegment q = qkv16.view(2 * 3 * btc), o = out16.view(2 * btc);
        ops.castFromFp32(q, DType.BF16, qkv, 3 * btc);
        forward(o, lse, q, B, T, C, NH, true);
        ops.castToFp32(out, o, DType.BF16, btc, 1f);
    }

    /**
     * {@code dqkv (B,T,3C) fp32 +=} the causal gradient of {@code Σ dout·out} with BF16 operands: qkv, dout and out
     * (fp32) cast to bf16 into scratch, {@link #backward} into a bf16 dqkv, which attention_bf16_accumulate adds into
     * the fp32 dqkv.
     */
    public void backwardFp32(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                             MemorySegment lse, int B, int T, int C, int NH) {
        limits(AttentionOps.checkBackward(dqkv, dout, qkv, out, lse, B, T, C, NH), C, NH, B);
        long btc = (long) B * T * C;
        MemorySegment q = qkv16.view(2 * 3 * btc), o = out16.view(2 * btc), g = dout16.view(2 * btc);
        MemorySegment dq = dqkv16.view(2 * 3 * btc);
        ops.castFromFp32(q, DType.BF16, qkv, 3 * btc);
        ops.castFromFp32(g, DType.BF16, dout, btc);
        ops.castFromFp32(o, DType.BF16, out, btc);
        backward(dq, g, q, o, lse, B, T, C, NH, true);
        Kernels.ATTENTION_BF16_ACCUMULATE.launch(ops.kernel(Kernels.ATTENTION_BF16_ACCUMULATE),
                Dim.of(GpuLaunch.blocks(3 * btc)), Dim.of(GpuLaunch.BLOCK), 0, null, dqkv, dq, 3 * btc);
    }

    @Override
    public void close() {
        d.close();
        qkv16.close();
        out16.close();
        dout16.close();
        dqkv16.close();
    }

    private void launch(KernelSignature s, Dim grid, int sharedBytes, Object... args) {
        s.launch(ops.kernel(s), grid, Dim.of(THREADS), sharedBytes, null, args);
    }

    /** Past the contract's sizes ({@link AttentionOps#checkSizes}): hs = C/NH ∈ {64, 128}, grid limits; returns hs. */
    static int headSize(int B, int T, int C, int NH) {
        return limits(AttentionOps.checkSizes(B, T, C, NH), C, NH, B);
    }

    private static int limits(int hs, int C, int NH, int B) {
        if (hs != 64 && hs != 128) {
            throw new IllegalArgumentException("bf16 attention takes head sizes 64 and 128, got hs = C/NH = " + C
                    + "/" + NH + " = " + hs);
        }
        if (B > 65_535 || NH > 65_535) {
            throw new IllegalArgumentException("attention grids take B and NH up to 65535, got B " + B + ", NH " + NH);
        }
        return hs;
    }

    /** 1/√hs rounded from float64, as the CPU kernels and the fp32 GPU kernel take it. */
    static float scale(int hs) {
        return (float) (1 / Math.sqrt(hs));
    }

    private static int tiles(int n, int tile) {
        return (n + tile - 1) / tile;
    }

    /** {@code s} holds {@code n} bf16 values (the messages of {@link OpChecks}). */
    private static void bf16s(String name, MemorySegment s, long n) {
        OpChecks.elements(name, s, n, 2, "bf16 values");
    }

    /** A 16-byte aligned address: the kernels load qkv and dout rows 16 bytes at a time. */
    private static void aligned(String name, MemorySegment s) {
        if (s.address() % 16 != 0) {
            throw new IllegalArgumentException(name + " must be 16-byte aligned, its address is 0x"
                    + Long.toHexString(s.address()));
        }
    }
}
