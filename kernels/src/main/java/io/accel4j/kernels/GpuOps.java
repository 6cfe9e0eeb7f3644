package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.core.ops.Ops;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.MemorySegment;
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
 *
 * <p>Like {@code CpuOps}, this class only forwards: each kernel family has its launcher ({@link EncoderGpu},
 * {@link LayerNormGpu}, {@link PointwiseGpu}, {@link ClassifierGpu}, {@link ReductionsGpu}, {@link CastGpu},
 * {@link AttentionGpu} with {@link AttentionBf16Gpu}, {@link AdamWGpu}, {@link SgdGpu}, {@link LionGpu}, {@link GpuMatmul}) over one
 * {@link GpuLaunch} (argument checks, grids, launches of the kernels of the lazily loaded {@link KernelModules}).
 */
public final class GpuOps implements Ops, AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(GpuOps.class);

    private final CudaContext context;
    private final CudaMemory memory;
    /** The PTX set loaded ({@link Kernels#ptxArch}). */
    private final String ptxArch;
    /** The PTX modules, each loaded on first use of one of its kernels. */
    private final KernelModules modules;
    private final GpuLaunch launch;
    private final Partials partials;
    private final EncoderGpu encoder;
    private final LayerNormGpu layernorm;
    private final PointwiseGpu pointwise;
    private final ClassifierGpu classifier;
    private final ReductionsGpu reductions;
    private final CastGpu casts;
    private final AttentionGpu attention;
    private final AdamWGpu adamw;
    private final SgdGpu sgd;
    private final LionGpu lion;
    /** The fused GELU matmuls that have said they run unfused ({@link #unfusedGelu}). */
    private final Set<String> unfusedGeluLogged = new HashSet<>();
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
        this.modules = new KernelModules(context, ptxArch);
        this.launch = new GpuLaunch(modules);
        this.partials = new Partials(context);
        this.encoder = new EncoderGpu(launch);
        this.layernorm = new LayerNormGpu(launch);
        this.pointwise = new PointwiseGpu(launch);
        this.classifier = new ClassifierGpu(launch, context);
        this.reductions = new ReductionsGpu(launch, partials);
        this.casts = new CastGpu(launch, partials, context);
        this.attention = new AttentionGpu(launch, context, this::attentionBf16);
        this.adamw = new AdamWGpu(launch, context);
        this.sgd = new SgdGpu(launch);
        this.lion = new LionGpu(launch);
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
        adamw.close();
        if (attentionBf16 != null) {
            attentionBf16.close();
        }
        casts.close();
        attention.close();
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

    // ---- encoder, layernorm, pointwise, classifier

    @Override
    public void encoderForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                               int B, int T, int C, int V) {
        encoder.forward(out, inp, wte, wpe, B, T, C, V);
    }

    @Override
    public void encoderBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                int B, int T, int C, int V) {
        encoder.backward(dwte, dwpe, dout, inp, B, T, C, V);
    }

    @Override
    public void layernormForward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                                 MemorySegment weight, MemorySegment bias, int N, int C) {
        layernorm.forward(out, mean, rstd, inp, weight, bias, N, C, EPS);
    }

    @Override
    public void layernormBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                                  MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                                  int N, int C) {
        layernorm.backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    }

    @Override
    public void geluForward(MemorySegment out, MemorySegment inp, long n) {
        pointwise.geluForward(out, inp, n);
    }

    @Override
    public void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        pointwise.geluBackward(dinp, inp, dout, n);
    }

    @Override
    public void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        pointwise.residualForward(out, inp1, inp2, n);
    }

    @Override
    public void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        pointwise.residualBackward(dinp1, dinp2, dout, n);
    }

    @Override
    public double classifierForward(MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                    int N, int V, int Vp) {
        return classifier.run(logits, losses, targets, N, V, Vp, 0f, false);
    }

    @Override
    public double classifierForwardBackward(MemorySegment logits, MemorySegment losses, MemorySegment targets,
                                            int N, int V, int Vp, float dlossScale) {
        return classifier.run(logits, losses, targets, N, V, Vp, dlossScale, true);
    }

    // ---- attention

    /**
     * FP32: attention.cu (head sizes up to 128); BF16: {@link AttentionBf16Gpu#forwardFp32} (the tensor-core kernel
     * on bf16 copies; head sizes 64 and 128, any other an {@link IllegalArgumentException} naming it).
     */
    @Override
    public void attentionForward(MemorySegment out, MemorySegment lse, MemorySegment qkv, int B, int T, int C, int NH,
                                 DType operands) {
        attention.forward(out, lse, qkv, B, T, C, NH, operands);
    }

    /** FP32: {@link AttentionGpu#backward}'s three kernels; BF16: {@link AttentionBf16Gpu#backwardFp32}. */
    @Override
    public void attentionBackward(MemorySegment dqkv, MemorySegment dout, MemorySegment qkv, MemorySegment out,
                                  MemorySegment lse, int B, int T, int C, int NH, DType operands) {
        attention.backward(dqkv, dout, qkv, out, lse, B, T, C, NH, operands);
    }

    /** The head-size limits of either kernel: FP32 up to 128, BF16 64 or 128 (B, T and the grid aside). */
    @Override
    public void checkAttention(DType operands, int C, int NH) {
        AttentionGpu.check(operands, C, NH);
    }

    /** The BF16 attention's launcher and scratch, made on first use and closed with this object. */
    private AttentionBf16Gpu attentionBf16() {
        if (attentionBf16 == null) {
            attentionBf16 = new AttentionBf16Gpu(this);
        }
        return attentionBf16;
    }

    // ---- optimizer

    @Override
    public void sgd(MemorySegment params, MemorySegment grads, MemorySegment buf, long offset, long length,
                    SgdConfig config, int step, float gradScale) {
        sgd.sgd(params, grads, buf, offset, length, config, step, gradScale);
    }

    @Override
    public void lion(MemorySegment params, MemorySegment grads, MemorySegment m, long offset, long length,
                     LionConfig config, float gradScale) {
        lion.lion(params, grads, m, offset, length, config, gradScale);
    }

    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      long offset, long length, AdamWConfig config, int step, float gradScale) {
        adamw.adamw(params, grads, m, v, offset, length, config, step, gradScale);
    }

    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, long offset, long length, AdamWConfig config, int step, float gradScale,
                          long seed) {
        adamw.adamwBf16(paramsBf16, master, grads, m, v, offset, length, config, step, gradScale, seed);
    }

    /** One launch for every range ({@link AdamWGpu}: a table of rows, 16-byte loads), bit-identical to a call each. */
    @Override
    public void adamw(MemorySegment params, MemorySegment grads, MemorySegment m, MemorySegment v,
                      List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale) {
        adamw.adamw(params, grads, m, v, ranges, config, step, gradScale);
    }

    /** One launch for every range, as the fp32 multi-range call. */
    @Override
    public void adamwBf16(MemorySegment paramsBf16, MemorySegment master, MemorySegment grads, MemorySegment m,
                          MemorySegment v, List<AdamWRange> ranges, AdamWConfig config, int step, float gradScale,
                          long seed) {
        adamw.adamwBf16(paramsBf16, master, grads, m, v, ranges, config, step, gradScale, seed);
    }

    // ---- reductions

    @Override
    public double sumOfSquares(MemorySegment x, long n) {
        return reductions.sumOfSquares(x, n);
    }

    @Override
    public boolean hasNonFinite(MemorySegment x, long n) {
        return reductions.hasNonFinite(x, n);
    }

    @Override
    public float amax(MemorySegment x, long n) {
        return reductions.amax(x, n);
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

    // ---- casts

    @Override
    public void castFromFp32(MemorySegment dst, DType dstType, MemorySegment src, long n) {
        casts.castFromFp32(dst, dstType, src, n);
    }

    @Override
    public float castToFp8(MemorySegment dst, DType fp8Type, MemorySegment src, long n, float scale) {
        return casts.castToFp8(dst, fp8Type, src, n, scale);
    }

    @Override
    public void castToFp32(MemorySegment dst, MemorySegment src, DType srcType, long n, float scaleInv) {
        casts.castToFp32(dst, src, srcType, n, scaleInv);
    }

    /**
     * {@link GpuMatmul#castTransposeToFp8}'s cast-transpose (FP8 codes of {@code src (R,C)} and of its transpose, the
     * amax returned), which needs no cuBLAS: available where cuBLASLt is missing too.
     */
    public float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R,
                                    int C, float scale) {
        return casts.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }
}
