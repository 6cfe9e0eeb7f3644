package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.AttentionOps;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.core.ops.Ops;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.HostCopy;
import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU backend of the kernel contract (PTX from {@code kernels/src/main/cuda}, JIT-compiled by the driver for the
 * device, a module at a time, when one of its kernels is first used).
 *
 * <p><b>Every {@link MemorySegment} passed is a device view</b>: a segment whose address is a device address and
 * whose size is the buffer's (see {@link #device(DeviceBuffer)}, or allocate through {@link #memory()}, whose copies
 * are the way data crosses to and from the host); it must never be read on the host. Work is queued on the default
 * stream in call order; the methods that return a value ({@link #classifierForward}, the reductions) copy a few bytes
 * back and so wait for everything queued before them.
 *
 * <p>On the GPU now: encoder fwd/bwd, layernorm fwd/bwd, GELU fwd/bwd, residual fwd/bwd, the fused classifier,
 * AdamW (fp32 and fp32-master + bf16 copy, bit-identical to the CPU kernel), sum of squares, amax, non-finite check,
 * causal attention fwd/bwd (FlashAttention-2 in fp32, head size up to 128; with BF16 operands on the tensor cores,
 * head size 64 or 128, {@link AttentionBf16Gpu}, which also runs non-causal), the casts (bit-identical to core's
 * {@link DType#encode}), and the matmul on cuBLASLt with FP32, BF16 or FP16 operands ({@link GpuMatmul}; when
 * {@code libcublasLt} is missing the rest still works and matmul throws, naming the library and where it was
 * searched). Determinism: no kernel uses atomics; reductions combine fixed per-block partials in a fixed order,
 * with a grid that depends only on the sizes, so results do not vary from run to run (cuBLASLt is run-to-run
 * reproducible for a given plan on a given GPU). Sizes are checked against the segments' sizes; data is not (token
 * ids and targets must be in range: the kernels do not check).
 */
public final class GpuOps implements Ops, AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(GpuOps.class);

    static final int BLOCK = 256;
    /** Most blocks of a grid-stride element-wise kernel, and the partials of a reduction. */
    static final int MAX_BLOCKS = 1024;
    /** Vocabulary buckets of encoder_backward_wte (the grid's y). */
    static final int WTE_BUCKETS = 32;
    /** Rows per block of the warp-per-row kernels (layernorm forward and dinp): a warp each. */
    static final int WARP_ROWS = BLOCK / 32;
    /** Threads per block of the thread-per-column kernels (layernorm params, encoder dwte). */
    static final int COLUMN_BLOCK = 128;
    /** Threads per block of the classifier (a block per row). */
    static final int CLASSIFIER_BLOCK = 512;

    private final CudaContext context;
    private final CudaMemory memory;
    /** The PTX set loaded ({@link Kernels#ptxArch}). */
    private final String ptxArch;
    /** The PTX modules, each loaded on first use of one of its kernels. */
    private final KernelModules modules;
    private final DeviceBuffer partials;
    /** attention_backward_d's D (B,NH,T), grown to the largest call so far. */
    private final ScratchBuffer attentionD;
    /** The fused GELU matmuls that have said they run unfused ({@link #unfusedGelu}). */
    private final Set<String> unfusedGeluLogged = new HashSet<>();
    /** The multi-range AdamW's launcher and table; null until the first multi-range call. */
    private AdamWGpu adamwRanges;
    /** The FP8 cast-transpose ({@link CastTransposeGpu}: its partials); null until the first call. */
    private CastTransposeGpu castTranspose;
    /** The BF16 attention ({@link AttentionBf16Gpu}: its bf16 copies); null until the first BF16 call. */
    private AttentionBf16Gpu attentionBf16;

    /** The matmuls, or null when cuBLASLt is missing ({@link #matmulMissing} says why). */
    private final GpuMatmul matmul;
    private final String matmulMissing;

    /**
     * Prepares the kernels of {@code context} (which stays the caller's to close, after this): each PTX module is
     * loaded the first time one of its kernels runs ({@link KernelModules}: a module the driver cannot JIT fails only
     * its own ops, and {@link #moduleLoads()} says what happened), the sm_90a PTX on a device of compute capability
     * 9.0 and the portable sm_80 PTX on any other ({@link Kernels#ptxArch}); and, when {@code libcublasLt} is found,
     * creates a cuBLASLt handle and workspace for the matmuls (loading the modules they use: a failure there leaves
     * matmul unavailable, saying why, and the other ops working).
     */
    public GpuOps(CudaContext context) {
        this.context = Objects.requireNonNull(context, "context");
        this.memory = new CudaMemory(context);
        this.ptxArch = Kernels.ptxArch(context.computeCapability());
        this.attentionD = ScratchBuffer.of(context);
        this.modules = new KernelModules(context, ptxArch);
        partials = context.allocate(8L * MAX_BLOCKS);
        CudaLibraries.Search cublasLt = CudaLibraries.cublasLt();
        GpuMatmul mm = null;
        String missing;
        if (cublasLt.found()) {
            try {
                mm = new GpuMatmul(context, modules::kernel, List.of());
                missing = null;
            } catch (CudaException e) {
                if (!e.call().contains("(module ")) {
                    partials.close();
                    modules.close();
                    throw e;
                }
                missing = "a module it needs did not load: " + e.getMessage().lines().findFirst().orElse("");
                LOG.warn("matmul on the GPU is unavailable: {}", missing);
            } catch (RuntimeException e) {
                partials.close();
                modules.close();
                throw e;
            }
        } else {
            missing = cublasLt.notFoundMessage();
        }
        matmul = mm;
        matmulMissing = missing;
    }

    /** Every PTX module load so far (module, outcome, JIT time and log), in order. */
    public List<KernelModules.Load> moduleLoads() {
        return modules.loads();
    }

    /** Loads every module not yet loaded, recording each outcome (the GPU check's first phase); returns them all. */
    public List<KernelModules.Load> loadAllModules() {
        return modules.loadAll();
    }

    /** A device view of {@code buffer}: what every segment argument of this class must be. */
    public static MemorySegment device(DeviceBuffer buffer) {
        return MemorySegment.ofAddress(buffer.address()).reinterpret(buffer.byteSize());
    }

    /** This device's memory ({@link CudaMemory}): where the segments passed to every op come from. */
    @Override
    public DeviceMemory memory() {
        return memory;
    }

    @Override
    public String describe() {
        return "cuda: " + context.name() + ", PTX " + ptxArch + ", "
                + (matmul == null ? "no cuBLASLt (matmul unavailable)" : matmul.describe());
    }

    @Override
    public void close() {
        if (adamwRanges != null) {
            adamwRanges.close();
        }
        if (attentionBf16 != null) {
            attentionBf16.close();
        }
        if (castTranspose != null) {
            castTranspose.close();
        }
        attentionD.close();
        if (matmul != null) {
            matmul.close();
        }
        partials.close();
        modules.close();
    }

    /** The context the kernels live in (for the launchers beside this class, e.g. {@link AttentionBf16Gpu}). */
    CudaContext context() {
        return context;
    }

    /** The loaded kernel of {@code s} (for the launchers beside this class). */
    CudaKernel kernel(KernelSignature s) {
        return modules.kernel(s);
    }

    private void launch(KernelSignature s, Dim grid, Dim block, Object... args) {
        launchShared(s, grid, block, 0, args);
    }

    /** A launch with {@code sharedBytes} of dynamic shared memory (opted in by {@link CudaKernel#launch}). */
    private void launchShared(KernelSignature s, Dim grid, Dim block, int sharedBytes, Object... args) {
        s.launch(modules.kernel(s), grid, block, sharedBytes, null, args);
    }

    /** A 1-D grid-stride launch over n elements (n ≥ 1). */
    private void launchN(KernelSignature s, long n, Object... args) {
        launch(s, Dim.of(blocks(n)), Dim.of(BLOCK), args);
    }

    /** The grid of a 1-D grid-stride launch over n elements, and of the reductions. */
    static int blocks(long n) {
        return (int) Math.min(MAX_BLOCKS, (n + BLOCK - 1) / BLOCK);
    }

    static void need(String name, MemorySegment s, long elements, long bytesEach) {
        Objects.requireNonNull(s, name);
        if (s.byteSize() < elements * bytesEach) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes, needs " + elements + " × "
                    + bytesEach + " = " + elements * bytesEach);
        }
    }

    static void positive(String name, long v) {
        if (v < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + v);
        }
    }

    private static void nonNegative(String name, long v) {
        if (v < 0) {
            throw new IllegalArgumentException(name + " must be >= 0, got " + v);
        }
    }

    /** Copies {@code bytes} from the device address of {@code src} into {@code host} (synchronous). */
    private void copyToHost(MemorySegment host, MemorySegment src, long bytes) {
        context.makeCurrent();
        HostCopy.toHost(host, src.address(), bytes);
    }

    // ---- encoder

    @Override
    public void encoderForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                               int B, int T, int C, int V) {
        positive("B", B); positive("T", T); positive("C", C); positive("V", V);
        long bt = (long) B * T;
        need("out", out, bt * C, 4); need("inp", inp, bt, 4);
        need("wte", wte, (long) V * C, 4); need("wpe", wpe, (long) T * C, 4);
        launchN(Kernels.ENCODER_FORWARD, bt * C, out, inp, wte, wpe, B, T, C);
    }

    @Override
    public void encoderBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                int B, int T, int C, int V) {
        positive("B", B); positive("T", T); positive("C", C); positive("V", V);
        long bt = (long) B * T;
        need("dwte", dwte, (long) V * C, 4); need("dwpe", dwpe, (long) T * C, 4);
        need("dout", dout, bt * C, 4); need("inp", inp, bt, 4);
        launchN(Kernels.ENCODER_BACKWARD_WPE, (long) T * C, dwpe, dout, B, T, C);
        launch(Kernels.ENCODER_BACKWARD_WTE, Dim.of((C + COLUMN_BLOCK - 1) / COLUMN_BLOCK, WTE_BUCKETS),
                Dim.of(COLUMN_BLOCK),
                dwte, dout, inp, Math.toIntExact(bt), C);
    }

    // ---- layernorm

    @Override
    public void layernormForward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                                 MemorySegment weight, MemorySegment bias, int N, int C) {
        positive("N", N); positive("C", C);
        long nc = (long) N * C;
        need("out", out, nc, 4); need("mean", mean, N, 4); need("rstd", rstd, N, 4);
        need("inp", inp, nc, 4); need("weight", weight, C, 4); need("bias", bias, C, 4);
        launch(Kernels.LAYERNORM_FORWARD, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                out, mean, rstd, inp, weight, bias, N, C, EPS);
    }

    @Override
    public void layernormBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                                  int N, int C) {
        positive("N", N); positive("C", C);
        long nc = (long) N * C;
        need("dinp", dinp, nc, 4); need("dweight", dweight, C, 4); need("dbias", dbias, C, 4);
        need("dout", dout, nc, 4); need("inp", inp, nc, 4); need("weight", weight, C, 4);
        need("mean", mean, N, 4); need("rstd", rstd, N, 4);
        launch(Kernels.LAYERNORM_BACKWARD_DINP, Dim.of((N + WARP_ROWS - 1) / WARP_ROWS), Dim.of(BLOCK),
                dinp, dout, inp, weight, mean, rstd, N, C);
        launch(Kernels.LAYERNORM_BACKWARD_PARAMS, Dim.of((C + COLUMN_BLOCK - 1) / COLUMN_BLOCK),
                Dim.of(COLUMN_BLOCK),
                dweight, dbias, dout, inp, mean, rstd, N, C);
    }

    // ---- pointwise

    @Override
    public void geluForward(MemorySegment out, MemorySegment inp, long n) {
        nonNegative("n", n); need("out", out, n, 4); need("inp", inp, n, 4);
        if (n > 0) {
            launchN(Kernels.GELU_FORWARD, n, out, inp, n);
        }
    }

    @Override
    public void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        nonNegative("n", n); need("dinp", dinp, n, 4); need("inp", inp, n, 4); need("dout", dout, n, 4);
        if (n > 0) {
            launchN(Kernels.GELU_BACKWARD, n, dinp, inp, dout, n);
        }
    }

    @Override
    public void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        nonNegative("n", n); need("out", out, n, 4); need("inp1", inp1, n, 4); need("inp2", inp2, n, 4);
        if (n > 0) {
            launchN(Kernels.RESIDUAL_FORWARD, n, out, inp1, inp2, n);
        }
    }

    @Override
    public void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        nonNegative("n", n); need("dinp1", dinp1, n, 4); need("dinp2", dinp2, n, 4); need("dout", dout, n, 4);
        if (n > 0) {
            launchN(Kernels.RESIDUAL_BACKWARD, n, dinp1, dinp2, dout, n);
        }
    }

    // ---- classifier

    @Override
    public double classifierForward(MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                    int N, int V, int Vp) {
        return classifier(logits, losses, targets, N, V, Vp, 0f, false);
    }

    @Override
    public double classifierForwardBackward(MemorySegment logits, MemorySegment losses, MemorySegment targets,
                                            int N, int V, int Vp, float dlossScale) {
        return classifier(logits, losses, targets, N, V, Vp, dlossScale, true);
    }

    private double classifier(MemorySegment logits, MemorySegment losses, MemorySegment targets, int N, int V, int Vp,
                              float dlossScale, boolean backward) {
        positive("N", N); positive("V", V);
        if (Vp < V) {
            throw new IllegalArgumentException("Vp must be >= V, got Vp " + Vp + ", V " + V);
        }
        need("logits", logits, (long) N * Vp, 4); need("losses", losses, N, 4); need("targets", targets, N, 4);
        launch(Kernels.CLASSIFIER, Dim.of(N), Dim.of(CLASSIFIER_BLOCK), logits, losses, targets, N, V, Vp, dlossScale,
                backward ? 1 : 0);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, N);
            copyToHost(host, losses, 4L * N);
            double sum = 0;
            for (int i = 0; i < N; i++) {
                sum += host.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            }
            return sum / N;
        }
    }

    // ---- attention (attention.cu: the tile sizes below are its ATTN_* constants)

    /** Threads of every attention tile kernel (4 warps). */
    private static final int ATTENTION_THREADS = 128;
    /** Query rows per block of attention_forward (ATTN_FWD_RPW·4). */
    private static final int ATTENTION_FWD_ROWS = 32;
    /** Query rows per block of attention_backward_dq (ATTN_DQ_RPW·4). */
    private static final int ATTENTION_DQ_ROWS = 16;
    /** Keys per block of attention_backward_dkdv (ATTN_DKDV_KPW·4). */
    private static final int ATTENTION_DKDV_KEYS = 16;
    /** The largest head size the kernels take (a lane owns columns lane + 32·i, i < 4). */
    static final int ATTENTION_MAX_HEAD_SIZE = 128;

    /** The head size as the kernels pad it: 32, 64 or 128 (attn_padded). */
    static int attentionPaddedHeadSize(int hs) {
        return hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
    }

    /** Dynamic shared memory of each attention tile kernel: 96 padded rows of tiles (48 KiB at hs 128). */
    static int attentionSharedBytes(int hs) {
        return 96 * attentionPaddedHeadSize(hs) * Float.BYTES;
    }

    /** Sizes ≥ 1, C divisible by NH, hs ≤ 128, grid limits; returns hs = C/NH. */
    private static int attentionHeadSize(int B, int T, int C, int NH) {
        positive("B", B); positive("T", T); positive("C", C); positive("NH", NH);
        if (C % NH != 0) {
            throw new IllegalArgumentException("C (" + C + ") must be divisible by NH (" + NH + ")");
        }
        int hs = C / NH;
        if (hs > ATTENTION_MAX_HEAD_SIZE) {
            throw new IllegalArgumentException("attention on the GPU takes head sizes up to "
                    + ATTENTION_MAX_HEAD_SIZE + ", got hs = C/NH = " + C + "/" + NH + " = " + hs);
        }
        if (B > 65_535 || NH > 65_535) {
            throw new IllegalArgumentException("attention grids take B and NH up to 65535, got B " + B + ", NH " + NH);
        }
        return hs;
    }

    private static float attentionScale(int hs) {
        return (float) (1 / Math.sqrt(hs)); // as the CPU kernels round it
    }

    /**
     * FP32: attention.cu (head sizes up to 128); BF16: {@link AttentionBf16Gpu#forwardFp32} (the tensor-core kernel
     * on bf16 copies; head sizes 64 and 128, any other an {@link IllegalArgumentException} naming it).
     */
    @Override
    public void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                                 DType operands) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            attentionBf16().forwardFp32(out, lse, qkv, B, T, C, NH);
            return;
        }
        int hs = attentionHeadSize(B, T, C, NH);
        long bt = (long) B * T;
        need("out", out, bt * C, 4); need("lse", lse, (long) B * NH * T, 4); need("qkv", qkv, bt * 3 * C, 4);
        launchShared(Kernels.ATTENTION_FORWARD, new Dim(tiles(T, ATTENTION_FWD_ROWS), NH, B),
                Dim.of(ATTENTION_THREADS), attentionSharedBytes(hs), out, lse, qkv, B, T, C, NH, attentionScale(hs));
    }

    /**
     * FP32: three kernels: D = rowsum(dO∘O) into a scratch buffer of this object, then dK, dV (a block per key tile)
     * and dQ (a block per query tile, a pass of its own so that no element is summed with atomics). Both passes
     * recompute P from lse; they add to disjoint columns of dqkv. BF16: {@link AttentionBf16Gpu#backwardFp32}.
     */
    @Override
    public void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                  MemorySegment lse, int B, int T, int C, int NH, DType operands) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            attentionBf16().backwardFp32(dqkv, dout, qkv, out, lse, B, T, C, NH);
            return;
        }
        int hs = attentionHeadSize(B, T, C, NH);
        long bt = (long) B * T, nLse = (long) B * NH * T;
        need("dqkv", dqkv, bt * 3 * C, 4); need("dout", dout, bt * C, 4); need("qkv", qkv, bt * 3 * C, 4);
        need("out", out, bt * C, 4); need("lse", lse, nLse, 4);
        MemorySegment d = attentionD.view(4 * nLse);
        // a warp per (b, t, h): 8 warps per block of 256
        launch(Kernels.ATTENTION_BACKWARD_D, Dim.of(Math.toIntExact((nLse + 7) / 8)), Dim.of(BLOCK),
                d, dout, out, B, T, C, NH);
        int smem = attentionSharedBytes(hs);
        float scale = attentionScale(hs);
        launchShared(Kernels.ATTENTION_BACKWARD_DKDV, new Dim(tiles(T, ATTENTION_DKDV_KEYS), NH, B),
                Dim.of(ATTENTION_THREADS), smem, dqkv, dout, qkv, lse, d, B, T, C, NH, scale);
        launchShared(Kernels.ATTENTION_BACKWARD_DQ, new Dim(tiles(T, ATTENTION_DQ_ROWS), NH, B),
                Dim.of(ATTENTION_THREADS), smem, dqkv, dout, qkv, lse, d, B, T, C, NH, scale);
    }


    /** The head-size limits of either kernel: FP32 up to 128, BF16 64 or 128 (B, T and the grid aside). */
    @Override
    public void checkAttention(DType operands, int C, int NH) {
        if (AttentionOps.checkOperands(operands) == DType.BF16) {
            AttentionBf16Gpu.headSize(1, 1, C, NH);
        } else {
            attentionHeadSize(1, 1, C, NH);
        }
    }

    /** The BF16 attention's launcher and scratch, made on first use and closed with this object. */
    private AttentionBf16Gpu attentionBf16() {
        if (attentionBf16 == null) {
            attentionBf16 = new AttentionBf16Gpu(this);
        }
        return attentionBf16;
    }

    private static int tiles(int n, int tile) {
        return (n + tile - 1) / tile;
    }

    // ---- optimizer

    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      long offset, long length, AdamWConfig config, int step, float gradScale) {
        adamwCheck(params, "params", grads, m, v, offset, length, config, step);
        if (length > 0) {
            float[] c = adamwCoefficients(config, step);
            launchN(Kernels.ADAMW_F32, length, params, grads, m, v, length, config.lr(), config.beta1(),
                    config.beta2(), config.eps(), config.weightDecay(), c[0], c[1], gradScale);
        }
    }

    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                          long seed) {
        adamwCheck(master, "master", grads, m, v, offset, length, config, step);
        need("paramsBf16", paramsBf16, length, 2);
        if (length > 0) {
            float[] c = adamwCoefficients(config, step);
            launchN(Kernels.ADAMW_BF16, length, paramsBf16, master, grads, m, v, offset, length, config.lr(),
                    config.beta1(), config.beta2(), config.eps(), config.weightDecay(), c[0], c[1], gradScale, seed);
        }
    }

    private static void adamwCheck(MemorySegment p, String pName, MemorySegment grads, MemorySegment m,
                                   MemorySegment v, long offset, long length, AdamWConfig config, int step) {
        Objects.requireNonNull(config, "config");
        nonNegative("offset", offset); nonNegative("length", length); positive("step", step);
        need(pName, p, length, 4); need("grads", grads, length, 4); need("m", m, length, 4); need("v", v, length, 4);
    }

    /** One launch for every range ({@link AdamWGpu}: a table of rows, 16-byte loads), bit-identical to a call each. */
    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale) {
        adamwRanges().adamw(params, grads, m, v, ranges, config, step, gradScale);
    }

    /** One launch for every range, as the fp32 multi-range call. */
    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale,
                          long seed) {
        adamwRanges().adamwBf16(paramsBf16, master, grads, m, v, ranges, config, step, gradScale, seed);
    }

    private AdamWGpu adamwRanges() {
        if (adamwRanges == null) {
            adamwRanges = new AdamWGpu(this);
        }
        return adamwRanges;
    }

    /** The bias corrections {@code 1/(1−β1ᵗ)}, {@code 1/(1−β2ᵗ)} in float64 rounded to fp32, as the CPU kernel. */
    static float[] adamwCoefficients(AdamWConfig k, int t) {
        return new float[] {(float) (1 / (1 - Math.pow(k.beta1(), t))), (float) (1 / (1 - Math.pow(k.beta2(), t)))};
    }

    // ---- reductions

    /**
     * The first {@code grid} per-block partials a reduction kernel wrote into {@link #partials}, copied into
     * {@code arena} (waits for the kernel): elements of {@code layout}, combined by the caller in block order.
     */
    private MemorySegment partialsOnHost(Arena arena, ValueLayout layout, int grid) {
        MemorySegment host = arena.allocate(layout, grid);
        copyToHost(host, device(partials), layout.byteSize() * grid);
        return host;
    }

    @Override
    public double sumOfSquares(MemorySegment x, long n) {
        nonNegative("n", n); need("x", x, n, 4);
        if (n == 0) {
            return 0;
        }
        int grid = blocks(n);
        launch(Kernels.SUM_OF_SQUARES, Dim.of(grid), Dim.of(BLOCK), device(partials), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return sumOfPartials(partialsOnHost(arena, ValueLayout.JAVA_DOUBLE, grid), grid);
        }
    }

    /** sum_of_squares's result from its {@code grid} float64 partials: their sum in block order. */
    static double sumOfPartials(MemorySegment partials, int grid) {
        double sum = 0;
        for (int b = 0; b < grid; b++) {
            sum += partials.getAtIndex(ValueLayout.JAVA_DOUBLE, b);
        }
        return sum;
    }

    @Override
    public boolean hasNonFinite(MemorySegment x, long n) {
        nonNegative("n", n); need("x", x, n, 4);
        if (n == 0) {
            return false;
        }
        int grid = blocks(n);
        launch(Kernels.HAS_NON_FINITE, Dim.of(grid), Dim.of(BLOCK), device(partials), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return anyPartial(partialsOnHost(arena, ValueLayout.JAVA_INT, grid), grid);
        }
    }

    /** has_non_finite's result from its {@code grid} int32 partials: whether any is nonzero. */
    static boolean anyPartial(MemorySegment partials, int grid) {
        for (int b = 0; b < grid; b++) {
            if (partials.getAtIndex(ValueLayout.JAVA_INT, b) != 0) {
                return true;
            }
        }
        return false;
    }

    @Override
    public float amax(MemorySegment x, long n) {
        nonNegative("n", n); need("x", x, n, 4);
        if (n == 0) {
            return 0f;
        }
        int grid = blocks(n);
        launch(Kernels.AMAX, Dim.of(grid), Dim.of(BLOCK), device(partials), x, n);
        try (Arena arena = Arena.ofConfined()) {
            return maxOfPartials(partialsOnHost(arena, ValueLayout.JAVA_FLOAT, grid), grid);
        }
    }

    /** amax's result from its {@code grid} fp32 partials: their maximum, NaN if any is NaN. */
    static float maxOfPartials(MemorySegment partials, int grid) {
        float max = 0f;
        for (int b = 0; b < grid; b++) {
            float p = partials.getAtIndex(ValueLayout.JAVA_FLOAT, b);
            max = Float.isNaN(p) || Float.isNaN(max) ? Float.NaN : Math.max(max, p);
        }
        return max;
    }

    // ---- matmul (cuBLASLt; GpuMatmul checks the sizes and has the row-major → column-major mapping)

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        matmul("matmulForward").forward(out, inp, weight, bias, N, C, OC, operands);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        matmul("matmulBackward").backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
    }

    /**
     * {@link MatmulOps#matmulForwardGelu} in one cuBLASLt GEMM with the GELU_AUX_BIAS epilogue
     * ({@link GpuMatmul#forwardGelu}). Where cuBLASLt cannot ({@code OC} not a multiple of 8, {@code pre} not 16-byte
     * aligned, or no algorithm for these types) it composes the unfused ops ({@link Ops}' default), saying so once.
     */
    @Override
    public void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                                  MemorySegment bias, int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        GpuMatmul mm = matmul("matmulForwardGelu");
        String refusal = GpuMatmul.geluEpilogueRefusal(pre, OC);
        if (refusal == null && mm.forwardGelu(out, pre, inp, weight, bias, N, C, OC, operands)) {
            return;
        }
        unfusedGelu("matmulForwardGelu", refusal, operands);
        Ops.super.matmulForwardGelu(out, pre, inp, weight, bias, N, C, OC, operands);
    }

    /**
     * {@link MatmulOps#matmulBackwardGelu} with cuBLASLt's DGELU_BGRAD epilogue ({@link GpuMatmul#backwardGelu}:
     * its bias gradient, which cuBLASLt overwrites, is added to {@code dpreBias} by the bias kernel). Where cuBLASLt
     * cannot ({@code C} not a multiple of 8, {@code pre} not 16-byte aligned, or no algorithm) it composes the
     * unfused ops ({@link Ops}' default, with scratch from {@link #memory()}), saying so once.
     */
    @Override
    public void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                   MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                   MemorySegment weight, int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        GpuMatmul mm = matmul("matmulBackwardGelu");
        String refusal = GpuMatmul.geluEpilogueRefusal(pre, C);
        if (refusal == null
                && mm.backwardGelu(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC, operands)) {
            return;
        }
        unfusedGelu("matmulBackwardGelu", refusal, operands);
        Ops.super.matmulBackwardGelu(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC, operands);
    }

    /** One log line per op, the first time it runs unfused, with the reason. */
    private void unfusedGelu(String op, String refusal, DType operands) {
        if (unfusedGeluLogged.add(op)) {
            LOG.info("{} runs unfused (matmul, then GELU): {}", op, refusal != null ? refusal
                    : "cuBLASLt has no algorithm for its epilogue with " + operands + " operands");
        }
    }

    @Override
    public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                              int N, int C, int OC, Fp8Scaling fp8) {
        matmul("matmulForward").fp8Forward(out, inp, weight, bias, N, C, OC, fp8);
    }

    @Override
    public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                               MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        matmul("matmulBackward").fp8Backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fp8);
    }

    /** {@link GpuMatmul#flushAmaxes}: the FP8 casts' amaxes wait in device slots until this. */
    @Override
    public void flushAmaxes() {
        if (matmul != null) {
            matmul.flushAmaxes();
        }
    }

    /**
     * This backend's {@link GpuMatmul} (its FP8 GEMM and cast-transpose are beyond {@link MatmulOps}), shared with
     * the matmul methods and closed with this object.
     *
     * @throws IllegalStateException naming the library when cuBLASLt is missing
     */
    public GpuMatmul gpuMatmul() {
        return matmul("gpuMatmul");
    }

    /** The matmuls, or an error naming the missing library: no fallback to a slow kernel. */
    private GpuMatmul matmul(String op) {
        if (matmul == null) {
            throw new IllegalStateException(op + " on the GPU needs cuBLASLt: " + matmulMissing + "; install it (the"
                    + " CUDA toolkit, or pip's nvidia-cublas) or point " + CudaLibraries.PATH_ENV + " at it");
        }
        return matmul;
    }

    // ---- casts (cast.cu: bit-identical to DType.encode / decode)

    @Override
    public void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        Objects.requireNonNull(dstType, "dstType");
        castCheck(dst, dstType, src, DType.FP32, n);
        if (n == 0) {
            return;
        }
        switch (dstType) {
            case FP32 -> copyOnDevice(dst, src, 4 * n);
            case BF16 -> launchN(Kernels.CAST_F32_TO_BF16, n, dst, src, n);
            case FP16 -> launchN(Kernels.CAST_F32_TO_F16, n, dst, src, n);
            default -> throw new IllegalArgumentException("castFromFp32 writes FP32, BF16 or FP16, got " + dstType
                    + ": use castToFp8 for FP8 (it takes a scale and returns the amax)");
        }
    }

    @Override
    public float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        Objects.requireNonNull(fp8Type, "fp8Type");
        if (!fp8Type.isFp8()) {
            throw new IllegalArgumentException("castToFp8 writes FP8_E4M3 or FP8_E5M2, got " + fp8Type);
        }
        castScale("scale", scale);
        castCheck(dst, fp8Type, src, DType.FP32, n);
        if (n == 0) {
            return 0f;
        }
        int grid = blocks(n);
        launch(Kernels.CAST_F32_TO_FP8, Dim.of(grid), Dim.of(BLOCK), dst, device(partials), src, n, scale,
                fp8Type == DType.FP8_E4M3 ? 1 : 0);
        try (Arena arena = Arena.ofConfined()) {
            return maxBitsOfPartials(partialsOnHost(arena, ValueLayout.JAVA_INT, grid), grid);
        }
    }

    /**
     * The amax of the fp8 casts from their {@code grid} partials, each a max |x| as its bit pattern (NaN already left
     * out by the kernel): the largest pattern, as a float.
     */
    static float maxBitsOfPartials(MemorySegment partials, int grid) {
        int max = 0;
        for (int b = 0; b < grid; b++) {
            max = Math.max(max, partials.getAtIndex(ValueLayout.JAVA_INT, b));
        }
        return Float.intBitsToFloat(max);
    }

    @Override
    public void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        Objects.requireNonNull(srcType, "srcType");
        castCheck(dst, DType.FP32, src, srcType, n);
        if (!srcType.isFp8() && scaleInv != 1f) {
            throw new IllegalArgumentException("scaleInv must be 1 for " + srcType + " (only FP8 is scaled), got "
                    + scaleInv);
        }
        castScale("scaleInv", scaleInv);
        if (n == 0) {
            return;
        }
        switch (srcType) {
            case FP32 -> copyOnDevice(dst, src, 4 * n);
            case BF16 -> launchN(Kernels.CAST_BF16_TO_F32, n, dst, src, n);
            case FP16 -> launchN(Kernels.CAST_F16_TO_F32, n, dst, src, n);
            default -> launchN(Kernels.CAST_FP8_TO_F32, n, dst, src, n, scaleInv, srcType == DType.FP8_E4M3 ? 1 : 0);
        }
    }

    /**
     * {@link GpuMatmul#castTransposeToFp8}'s cast-transpose (FP8 codes of {@code src (R,C)} and of its transpose, the
     * amax returned), which needs no cuBLAS: available where cuBLASLt is missing too.
     */
    public float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R,
                                    int C, float scale) {
        if (castTranspose == null) {
            castTranspose = new CastTransposeGpu(context, modules.kernel(Kernels.CAST_TRANSPOSE_F32_TO_FP8));
        }
        return castTranspose.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }

    private static void castCheck(MemorySegment dst, DType dstType, MemorySegment src, DType srcType, long n) {
        nonNegative("n", n);
        need("dst", dst, n, dstType.byteSize());
        need("src", src, n, srcType.byteSize());
        long dEnd = dst.address() + n * dstType.byteSize(), sEnd = src.address() + n * srcType.byteSize();
        if (n > 0 && dst.address() < sEnd && src.address() < dEnd) {
            throw new IllegalArgumentException("dst [0x" + Long.toHexString(dst.address()) + ", 0x"
                    + Long.toHexString(dEnd) + ") overlaps src [0x" + Long.toHexString(src.address()) + ", 0x"
                    + Long.toHexString(sEnd) + ")");
        }
    }

    /** A scale must be finite and positive (as the CPU casts require). */
    private static void castScale(String name, float scale) {
        if (!(scale > 0 && scale < Float.POSITIVE_INFINITY)) {
            throw new IllegalArgumentException(name + " must be finite and > 0, got " + scale);
        }
    }

    /** Queues a device-to-device copy on the default stream (in order with the kernels). */
    private void copyOnDevice(MemorySegment dst, MemorySegment src, long bytes) {
        context.makeCurrent();
        CudaException.check("cuMemcpyDtoDAsync_v2",
                cuda_h.cuMemcpyDtoDAsync_v2(dst.address(), src.address(), bytes, MemorySegment.NULL));
    }
}
