package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cuda.CublasLtHandle;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.CudaModule;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * Linear layers and FP8 GEMMs on cuBLASLt (FP32 compute, no TF32): a handle, a workspace, device scratch for the
 * rounded operands, and the plans made so far (cached by shape, types, epilogue pointers and operand alignments,
 * least recently used closed beyond {@value #MAX_PLANS}). Every {@link MemorySegment} is a device view (see
 * {@link GpuOps#device}); work is queued on the default stream. Not thread-safe.
 *
 * <p><b>API.</b> {@link #create} (its own PTX modules) or {@link GpuOps}' instance; then
 * <ul>
 *   <li>{@link #forward} / {@link #backward}: {@link MatmulOps}' linear layer with FP32, BF16 or FP16 operands;</li>
 *   <li>{@link #forwardGelu} / {@link #backwardGelu}: {@link MatmulOps}' MLP matmuls with GELU fused, on cuBLASLt's
 *       GELU_AUX_BIAS and DGELU_BGRAD epilogues (aux = the fp32 pre-activation, ld a multiple of 8: see
 *       {@link #geluEpilogueRefusal}); they return false when cuBLASLt has no algorithm, and {@link GpuOps} then
 *       composes the unfused ops;</li>
 *   <li>{@link #fp8}: {@code out (M,N) (+)= aScaleInv·bScaleInv · a (M,K) · b (N,K)ᵀ} on FP8 codes, optionally
 *       writing {@code max |out|} to a device float;</li>
 *   <li>{@link #castTransposeToFp8}: FP8 codes of an fp32 matrix and of its transpose in one pass, returning its amax
 *       (the K-major operands a backward pass needs);</li>
 *   <li>{@link #fp8Forward} / {@link #fp8Backward}: {@link MatmulOps}' linear layer with FP8 operands and delayed
 *       scaling ({@link Fp8Scaling}), built from the two above, with no host synchronisation: each cast's amax
 *       waits in a device slot ({@link Fp8AmaxSlots}) until {@link #flushAmaxes} records them all with one copy,
 *       and the GEMM reads each operand's dequantisation factor from that slot, written by the cast.</li>
 * </ul>
 *
 * <p><b>Row-major ↔ column-major.</b> A row-major (R, C) matrix is, byte for byte, the column-major (C, R) matrix
 * with leading dimension C: its transpose. So each row-major product {@code Y = X·W} is run as the column-major
 * {@code Yᵀ = Wᵀ·Xᵀ}, operands swapped and nothing moved (superscript c = the column-major view):
 * <ul>
 *   <li>forward {@code out (N,OC) = inp (N,C)·Wᵀ + bias} is {@code outᶜ (OC×N) = (Wᶜ)ᵀ (OC×C)·inpᶜ (C×N) + bias}:
 *       m = OC, n = N, k = C; A = W stored C×OC (ld C), transposed; B = inp stored C×N (ld C); D ld OC. The BIAS
 *       epilogue adds a vector over D's m = OC rows, broadcast over its N columns: exactly the per-output bias.</li>
 *   <li>{@code dinp (N,C) += dout (N,OC)·W (OC,C)} is {@code dinpᶜ (C×N) += Wᶜ (C×OC)·doutᶜ (OC×N)}: m = C, n = N,
 *       k = OC; A = W stored C×OC (ld C); B = dout stored OC×N (ld OC); beta 1, C = D = dinp.</li>
 *   <li>{@code dweight (OC,C) += doutᵀ (OC,N)·inp (N,C)} is {@code dweightᶜ (C×OC) += inpᶜ (C×N)·(doutᶜ)ᵀ (N×OC)}:
 *       m = C, n = OC, k = N; A = inp stored C×N (ld C); B = dout stored OC×N (ld OC), transposed; beta 1.</li>
 *   <li>{@code dbias (OC) += Σ_rows dout}: the {@code matmul_backward_bias} kernel (matmul.cu), deterministic. Not
 *       the BGRADB epilogue of the dweight GEMM: it overwrites the bias gradient rather than adding to it, so it
 *       would need a scratch vector and an add kernel anyway; and not a GEMM with a ones vector, which needs a
 *       ones buffer as long as N.</li>
 *   <li>FP8 {@code out (M,N) = a (M,K)·b (N,K)ᵀ} is {@code outᶜ (N×M) = (bᶜ)ᵀ (N×K)·aᶜ (K×M)}: m = N, n = M, k = K;
 *       A = b stored K×N (ld K), transposed; B = a stored K×M (ld K): the "TN" layout FP8 requires — both operands
 *       K-major. A backward pass needs transposed FP8 copies ({@link #castTransposeToFp8}): dinp (N,C) += dout·W takes
 *       dout (N,OC) as a and Wᵀ (C,OC) as b, K = OC; dweight (OC,C) += doutᵀ·inp takes doutᵀ (OC,N) as a and inpᵀ
 *       (C,N) as b, K = N.</li>
 * </ul>
 *
 * <p><b>BF16/FP16 operands</b> ({@link MatmulOps}' contract): each fp32 operand is first rounded into device scratch
 * by cast.cu's kernels (round to nearest even, bit-identical to {@code Bf16.fromFloat}/{@code Fp16.fromFloat}, fp16
 * overflowing to ±inf), then cuBLASLt multiplies the rounded values with FP32 compute into fp32 outputs; bias and
 * dbias stay fp32 (dbias sums the unrounded dout). The CPU GEMM differs only in the order of the fp32 additions.
 *
 * <p><b>FP8 rules</b> (cuBLASLt, Ada and Hopper; checked here with this class's names, and by
 * {@link CublasLtMatmul.Spec#check()}): K a multiple of 16; a row of {@code out} a multiple of 16 bytes (N a
 * multiple of 4 for FP32, of 8 for BF16); {@code a}, {@code b}, {@code out} 16-byte aligned; not both E5M2
 * (E4M3×E4M3 for forward products, E4M3×E5M2 or E5M2×E4M3 with E5M2 gradients); the GPU must be sm_89 or newer.
 * The scales are the <em>dequantisation</em> factors, {@code 1/scale} of the cast that made each operand (an
 * {@link io.accel4j.core.fp8.AmaxHistory}'s {@code scaleInv()}), as in the CPU FP8 GEMM ({@code Gemm.gemm}'s
 * {@code scaleA}, {@code scaleB}).
 */
public final class GpuMatmul implements AutoCloseable {

    /**
     * What an FP8 GEMM's K must be a multiple of (cuBLASLt): so {@link #fp8Forward} needs C, and {@link #fp8Backward}
     * OC and N, to be multiples of it.
     */
    public static final int FP8_MULTIPLE = 16;
    /** cuBLASLt's recommended workspace for Hopper (NVIDIA's cuBLAS docs: 32 MiB). */
    static final long WORKSPACE_BYTES = 32L << 20;
    /**
     * Plans kept: a GPT-2 step has a few per layer and pass, each distinct by bias address, and with FP8 three more
     * per linear layer, distinct by their operands' scale-inverse slots (GPT-2 XL's 48 blocks: ~1,000 in all).
     */
    static final int MAX_PLANS = 2048;
    /** Scratch slices start at multiples of this (cuBLASLt's preferred alignment). */
    private static final long SLICE_ALIGN = 256;
    private static final int CAST_BLOCK = 256;
    /** matmul_backward_bias's block: 32 columns × 8 row phases (the kernel assumes this shape); grid ceil(OC / 32). */
    static final Dim BIAS_BLOCK = Dim.of(32, 8);
    private static final int CAST_MAX_BLOCKS = 1024;

    private enum Kind { FORWARD, DINP, DWEIGHT, FP8, FORWARD_GELU, DINP_DGELU }

    /**
     * A plan's identity: everything its spec depends on. {@code extra} is the amax address of an FP8 plan, the aux
     * address of a GELU plan; {@code scaleA} and {@code scaleB} the device addresses of an FP8 plan's operands'
     * dequantisation factors (cuBLASLt's A and B); 0 where unused.
     */
    private record Key(Kind kind, int m, int n, int k, int typeA, int typeB, int typeD, long bias, long extra,
                       long scaleA, long scaleB, int alignA, int alignB, int alignC, int alignD) {}

    private final CudaContext context;
    /** 89 for sm_89: FP8 needs at least that. */
    private final int computeCapability;
    private final List<CudaModule> ownedModules;
    private final CublasLtHandle lt;
    private final DeviceBuffer workspace;
    /** The two FP8 dequantisation factors of the next {@link #fp8} (cuBLASLt's A scale, then B scale). */
    private final DeviceBuffer fp8Scales;
    private final CudaKernel biasKernel;
    private final CudaKernel toBf16;
    private final CudaKernel toF16;
    /** cast_transpose_f32_to_fp8, with its amax partials. */
    private final CastTransposeGpu castTranspose;
    /** The amaxes of {@link #fp8Forward}/{@link #fp8Backward}'s casts, until {@link #flushAmaxes}. */
    private final Fp8AmaxSlots amaxSlots;
    /** The rounded operands of a BF16/FP16 product, grown to the largest call so far. */
    private final ScratchBuffer scratch;
    /** The FP8 codes of {@link #fp8Forward}/{@link #fp8Backward}'s operands and their transposes, likewise. */
    private final ScratchBuffer fp8Codes;
    /** fp32 zeros (max(N, OC) of the largest call) for {@link #fp8Forward}'s bias broadcast. */
    private final ScratchBuffer zeros;
    /** The bias gradient DGELU_BGRAD overwrites, before {@link #backwardGelu} adds it to the caller's. */
    private final ScratchBuffer biasGrad;
    /**
     * Fused GELU epilogues cuBLASLt had no algorithm for ({@link #unsupportedKey}: kind, operand type, with or
     * without a bias): asked once, then refused at once.
     */
    private final Set<String> unsupported = new HashSet<>();
    private final Map<Key, CublasLtMatmul> plans = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Key, CublasLtMatmul> eldest) {
            if (size() > MAX_PLANS) {
                eldest.getValue().close();
                return true;
            }
            return false;
        }
    };

    /**
     * A matmul engine on {@code context} with its own copies of the PTX modules it launches (matmul.cu's bias
     * gradient, cast.cu's roundings), closed with it. Needs {@code libcublasLt}: otherwise a
     * {@link io.accel4j.cuda.CudaException} names where it was searched.
     */
    public static GpuMatmul create(CudaContext context) {
        Objects.requireNonNull(context, "context");
        List<CudaModule> modules = new ArrayList<>();
        try {
            Map<String, CudaModule> byName = new LinkedHashMap<>();
            for (String name : List.of(Kernels.MATMUL_BACKWARD_BIAS.module(), Kernels.CAST_F32_TO_BF16.module())) {
                CudaModule m = context.loadPtx(Kernels.ptx(name));
                modules.add(m);
                byName.put(name, m);
            }
            return new GpuMatmul(context, s -> byName.get(s.module()).function(s.entry()), modules);
        } catch (RuntimeException e) {
            modules.forEach(CudaModule::close);
            throw e;
        }
    }

    /**
     * A handle, a workspace and the kernels ({@code kernels} looks them up by signature) on {@code context};
     * {@code ownedModules} are closed by {@link #close()} (empty when the caller owns the modules).
     */
    GpuMatmul(CudaContext context, Function<KernelSignature, CudaKernel> kernels, List<CudaModule> ownedModules) {
        this.context = context;
        this.scratch = ScratchBuffer.of(context);
        this.fp8Codes = ScratchBuffer.of(context);
        this.zeros = ScratchBuffer.zeroed(context);
        this.biasGrad = ScratchBuffer.of(context);
        this.ownedModules = List.copyOf(ownedModules);
        this.biasKernel = kernels.apply(Kernels.MATMUL_BACKWARD_BIAS);
        this.toBf16 = kernels.apply(Kernels.CAST_F32_TO_BF16);
        this.toF16 = kernels.apply(Kernels.CAST_F32_TO_F16);
        CudaKernel castTransposeKernel = kernels.apply(Kernels.CAST_TRANSPOSE_F32_TO_FP8);
        this.amaxSlots = new Fp8AmaxSlots(context, kernels.apply(Kernels.FP8_AMAX_TO_SLOT));
        this.computeCapability = context.computeCapability();
        this.lt = CublasLtHandle.create(context);
        List<DeviceBuffer> made = new ArrayList<>();
        try {
            made.add(context.allocate(WORKSPACE_BYTES));
            made.add(context.allocate(8));
        } catch (RuntimeException e) {
            made.forEach(DeviceBuffer::close);
            lt.close();
            throw e;
        }
        this.workspace = made.get(0);
        this.fp8Scales = made.get(1);
        CastTransposeGpu ct;
        try {
            ct = new CastTransposeGpu(context, castTransposeKernel);
        } catch (RuntimeException e) {
            made.forEach(DeviceBuffer::close);
            lt.close();
            throw e;
        }
        this.castTranspose = ct;
    }

    /** {@code "cuBLASLt 120605"}. */
    public String describe() {
        return "cuBLASLt " + lt.version();
    }

    /**
     * {@code out (N,OC) = inp (N,C)·weightᵀ + bias} with products of {@code operands} precision (FP32, BF16 or FP16,
     * see {@link MatmulOps}); {@code bias} (OC) may be null.
     */
    public void forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C,
                        int OC, DType operands) {
        checkForward(out, inp, weight, bias, N, C, OC, operands);
        Operands r = roundForward(inp, weight, N, C, OC, operands);
        MemorySegment w = r.w, x = r.x;
        long b = bias == null ? 0 : bias.address();
        int t = cudaType(operands);
        CublasLtMatmul plan = plan(new Key(Kind.FORWARD, OC, N, C, t, t, cublas_api_h.CUDA_R_32F, b, 0, 0, 0,
                align(w), align(x), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = spec(key).transpose(true, false);
            if (b != 0) {
                s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_BIAS).bias(b, cublas_api_h.CUDA_R_32F);
            }
            return s;
        });
        plan.run(null, w.address(), x.address(), out.address(), out.address(), 1f, 0f);
    }

    /**
     * {@code dinp += dout·weight}, {@code dweight += doutᵀ·inp}, {@code dbias += Σ_rows dout} (dbias may be null)
     * with products of {@code operands} precision (see {@link MatmulOps}).
     */
    public void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                         MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        checkBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        Operands r = roundBackward(dout, inp, weight, N, C, OC, operands);
        int t = cudaType(operands), f32 = cublas_api_h.CUDA_R_32F;
        CublasLtMatmul dx = plan(new Key(Kind.DINP, C, N, OC, t, t, f32, 0, 0, 0, 0, align(r.w), align(r.g),
                align(dinp), align(dinp)), GpuMatmul::spec);
        dx.run(null, r.w.address(), r.g.address(), dinp.address(), dinp.address(), 1f, 1f);
        weightAndBiasGradients(dweight, dbias, dout, r, N, C, OC, operands);
    }

    /** {@link #forward}'s size checks (also {@link #forwardGelu}'s). */
    private static void checkForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                                     int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        GpuLaunch.positive("N", N); GpuLaunch.positive("C", C); GpuLaunch.positive("OC", OC);
        GpuLaunch.need("out", out, (long) N * OC, 4); GpuLaunch.need("inp", inp, (long) N * C, 4);
        GpuLaunch.need("weight", weight, (long) OC * C, 4);
        if (bias != null) {
            GpuLaunch.need("bias", bias, OC, 4);
        }
    }

    /** {@link #backward}'s size checks (dinp: the input gradient, {@code dpre} for {@link #backwardGelu}). */
    private static void checkBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                      MemorySegment dout, MemorySegment inp, MemorySegment weight, int N, int C,
                                      int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        GpuLaunch.positive("N", N); GpuLaunch.positive("C", C); GpuLaunch.positive("OC", OC);
        GpuLaunch.need("dinp", dinp, (long) N * C, 4); GpuLaunch.need("dweight", dweight, (long) OC * C, 4);
        GpuLaunch.need("dout", dout, (long) N * OC, 4); GpuLaunch.need("inp", inp, (long) N * C, 4);
        GpuLaunch.need("weight", weight, (long) OC * C, 4);
        if (dbias != null) {
            GpuLaunch.need("dbias", dbias, OC, 4);
        }
    }

    /**
     * A pass's GEMM operands: weight, inp and (backward) dout as given (FP32) or rounded into scratch; {@code g} is
     * null forward.
     */
    private record Operands(MemorySegment w, MemorySegment x, MemorySegment g) {}

    /** The forward operands of {@code operands} precision (BF16/FP16: queued roundings into {@link #scratch}). */
    private Operands roundForward(MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        if (operands == DType.FP32) {
            return new Operands(weight, inp, null);
        }
        long wAt = 0, xAt = slice((long) OC * C, 2);
        MemorySegment base = scratch.view(xAt + (long) N * C * 2);
        return new Operands(round(base, wAt, weight, (long) OC * C, operands),
                round(base, xAt, inp, (long) N * C, operands), null);
    }

    /** The backward operands of {@code operands} precision (BF16/FP16: queued roundings into {@link #scratch}). */
    private Operands roundBackward(MemorySegment dout, MemorySegment inp, MemorySegment weight, int N, int C, int OC,
                                   DType operands) {
        if (operands == DType.FP32) {
            return new Operands(weight, inp, dout);
        }
        long wAt = 0, xAt = slice((long) OC * C, 2), gAt = xAt + slice((long) N * C, 2);
        MemorySegment base = scratch.view(gAt + (long) N * OC * 2);
        return new Operands(round(base, wAt, weight, (long) OC * C, operands),
                round(base, xAt, inp, (long) N * C, operands), round(base, gAt, dout, (long) N * OC, operands));
    }

    /** {@code dweight += doutᵀ·inp} (the rounded operands) and {@code dbias += Σ_rows dout} (the fp32 dout). */
    private void weightAndBiasGradients(MemorySegment dweight, MemorySegment dbias, MemorySegment dout, Operands r,
                                        int N, int C, int OC, DType operands) {
        int t = cudaType(operands), f32 = cublas_api_h.CUDA_R_32F;
        CublasLtMatmul dw = plan(new Key(Kind.DWEIGHT, C, OC, N, t, t, f32, 0, 0, 0, 0, align(r.x), align(r.g),
                align(dweight), align(dweight)), key -> spec(key).transpose(false, true));
        dw.run(null, r.x.address(), r.g.address(), dweight.address(), dweight.address(), 1f, 1f);
        if (dbias != null) {
            addColumnSums(dbias, dout, N, OC);
        }
    }

    /** {@code dst (n) += Σ_rows src (rows, n)}: matmul.cu's deterministic bias-gradient kernel. */
    private void addColumnSums(MemorySegment dst, MemorySegment src, int rows, int n) {
        Kernels.MATMUL_BACKWARD_BIAS.launch(biasKernel, Dim.of((n + 31) / 32), BIAS_BLOCK, 0, null, dst, src, rows, n);
    }

    /**
     * Why cuBLASLt's GELU epilogues cannot take an aux matrix {@code aux} whose leading dimension is {@code ld} (the
     * rows of D, column-major): null when they can. The aux leading dimension must be a multiple of 8 (cuBLASLt's
     * rule for CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD), and the aux pointer is asked to be 16-byte aligned as the
     * other matrices of a tensor-core GEMM.
     */
    static String geluEpilogueRefusal(MemorySegment aux, int ld) {
        Objects.requireNonNull(aux, "pre");
        if (ld % 8 != 0) {
            return "the GELU matrix's leading dimension " + ld + " is not a multiple of 8 (cuBLASLt's aux rule)";
        }
        if (aux.address() % 16 != 0) {
            return "the GELU matrix at 0x" + Long.toHexString(aux.address()) + " is not 16-byte aligned";
        }
        return null;
    }

    /**
     * {@code pre (N,OC) = inp·weightᵀ + bias}, {@code out = gelu(pre)} ({@link MatmulOps#matmulForwardGelu}) in one
     * cuBLASLt call with the GELU_AUX_BIAS epilogue (GELU_AUX without a bias): D = out, aux = pre (fp32, D's type;
     * cuBLASLt stores the GELU input after the bias, column-major OC×N with ld OC, i.e. row-major (N,OC)).
     * cuBLASLt's GELU is the tanh form, rounded its own way (not bit-identical to gelu.cu).
     *
     * @return false, having changed no output, when cuBLASLt has no algorithm for this epilogue with these types
     *     (remembered: asked once): the caller then composes the unfused ops
     * @throws IllegalArgumentException for sizes, or when {@link #geluEpilogueRefusal} refuses {@code pre}
     */
    public boolean forwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                               MemorySegment bias, int N, int C, int OC, DType operands) {
        checkForward(out, inp, weight, bias, N, C, OC, operands);
        GpuLaunch.need("pre", pre, (long) N * OC, 4);
        refuseAux(pre, OC);
        Operands r = roundForward(inp, weight, N, C, OC, operands);
        MemorySegment w = r.w, x = r.x;
        long b = bias == null ? 0 : bias.address(), aux = pre.address();
        int t = cudaType(operands);
        CublasLtMatmul plan = fusedPlan(new Key(Kind.FORWARD_GELU, OC, N, C, t, t, cublas_api_h.CUDA_R_32F, b, aux, 0, 0,
                align(w), align(x), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = spec(key).transpose(true, false).aux(aux, OC);
            return b == 0 ? s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_GELU_AUX)
                    : s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_GELU_AUX_BIAS).bias(b, cublas_api_h.CUDA_R_32F);
        });
        if (plan == null) {
            return false;
        }
        plan.run(null, w.address(), x.address(), out.address(), out.address(), 1f, 0f);
        return true;
    }

    /**
     * {@link MatmulOps#matmulBackwardGelu}: {@code dpre (N,C) = gelu'(pre)·(dout·weight)} with the DGELU epilogue
     * (beta 0: cuBLASLt scales {@code alpha·A·B + beta·C} as a whole by gelu', so it cannot add to dpre — the
     * contract writes it), aux = pre (fp32, ld C), and, when {@code dpreBias} is not null, DGELU_BGRAD's bias
     * gradient {@code Σ_rows dpre}, which cuBLASLt overwrites: it goes to scratch and matmul.cu's bias kernel adds
     * it into dpreBias (a sum over one row); then dweight and dbias as {@link #backward}.
     *
     * @return false, having changed no output, when cuBLASLt has no algorithm for this epilogue (remembered)
     * @throws IllegalArgumentException for sizes, or when {@link #geluEpilogueRefusal} refuses {@code pre}
     */
    public boolean backwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight, MemorySegment dbias,
                                MemorySegment dout, MemorySegment inp, MemorySegment pre, MemorySegment weight,
                                int N, int C, int OC, DType operands) {
        checkBackward(dpre, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        GpuLaunch.need("pre", pre, (long) N * C, 4);
        if (dpreBias != null) {
            GpuLaunch.need("dpreBias", dpreBias, C, 4);
        }
        refuseAux(pre, C);
        Operands r = roundBackward(dout, inp, weight, N, C, OC, operands);
        long aux = pre.address(), bg = dpreBias == null ? 0 : biasGrad.view((long) C * 4).address();
        int t = cudaType(operands);
        CublasLtMatmul dx = fusedPlan(new Key(Kind.DINP_DGELU, C, N, OC, t, t, cublas_api_h.CUDA_R_32F, bg, aux, 0, 0,
                align(r.w), align(r.g), align(dpre), align(dpre)), key -> {
            CublasLtMatmul.Spec s = spec(key).aux(aux, C);
            return bg == 0 ? s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU)
                    : s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU_BGRAD).bias(bg, cublas_api_h.CUDA_R_32F);
        });
        if (dx == null) {
            return false;
        }
        dx.run(null, r.w.address(), r.g.address(), dpre.address(), dpre.address(), 1f, 0f);
        if (dpreBias != null) {
            addColumnSums(dpreBias, biasGrad.view((long) C * 4), 1, C);
        }
        weightAndBiasGradients(dweight, dbias, dout, r, N, C, OC, operands);
        return true;
    }

    private static void refuseAux(MemorySegment aux, int ld) {
        String why = geluEpilogueRefusal(aux, ld);
        if (why != null) {
            throw new IllegalArgumentException("cuBLASLt's GELU epilogue cannot take this call: " + why);
        }
    }

    /** {@link #plan}, or null when cuBLASLt has no algorithm for a fused GELU spec (NOT_SUPPORTED; remembered). */
    private CublasLtMatmul fusedPlan(Key key, Function<Key, CublasLtMatmul.Spec> spec) {
        if (unsupported.contains(unsupportedKey(key))) {
            return null;
        }
        try {
            return plan(key, spec);
        } catch (CudaException e) {
            if (e.status() != cublas_api_h.CUBLAS_STATUS_NOT_SUPPORTED) {
                throw e;
            }
            unsupported.add(unsupportedKey(key));
            return null;
        }
    }

    /** What a fused epilogue's support depends on here: the kind, the operand type, whether there is a bias. */
    private static String unsupportedKey(Key key) {
        return key.kind() + "/" + key.typeA() + "/" + (key.bias() != 0);
    }

    /**
     * {@code out (M,N) (+)= aScaleInv·bScaleInv · Σ_k a[i,k]·b[j,k]}: FP8 codes {@code a} (M,K) and {@code b} (N,K),
     * both row-major with K contiguous, multiplied with FP32 compute (no fast accumulation) into {@code out} (FP32
     * or BF16): overwritten, or added to when {@code accumulate} (a backward pass's {@code +=}). When
     * {@code amaxOut} is not null, cuBLASLt writes {@code max |out|} (one float) there.
     * The class comment has the FP8 rules; the scale factors are uploaded to a device pair of this object before
     * the GEMM is queued (a synchronous host-to-device copy, in order with the default stream).
     *
     * @throws IllegalArgumentException naming the argument and the numbers when a rule or a size does not hold
     */
    public void fp8(MemorySegment out, DType outType, boolean accumulate, MemorySegment a, DType aType,
                    float aScaleInv, MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut,
                    int M, int N, int K) {
        checkFp8(out, outType, a, aType, aScaleInv, b, bType, bScaleInv, amaxOut, M, N, K);
        checkFp8Device();
        try (Arena arena = Arena.ofConfined()) {
            fp8Scales.copyFrom(arena.allocateFrom(ValueLayout.JAVA_FLOAT, aScaleInv, bScaleInv));
        }
        fp8Gemm(out, outType, accumulate, a, aType, fp8Scales.address(), b, bType, fp8Scales.address() + 4, amaxOut,
                M, N, K);
    }

    /**
     * {@link #fp8} (its preconditions checked by the caller) with the dequantisation factors read on the device, in
     * stream order, from {@code aScaleInv} and {@code bScaleInv} (device addresses of one float each).
     */
    private void fp8Gemm(MemorySegment out, DType outType, boolean accumulate, MemorySegment a, DType aType,
                         long aScaleInv, MemorySegment b, DType bType, long bScaleInv, MemorySegment amaxOut,
                         int M, int N, int K) {
        long amax = amaxOut == null ? 0 : amaxOut.address();
        int d = cudaType(outType);
        CublasLtMatmul plan = plan(new Key(Kind.FP8, N, M, K, cudaType(bType), cudaType(aType), d, 0, amax,
                bScaleInv, aScaleInv, align(b), align(a), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = spec(key).transpose(true, false).types(key.typeA(), key.typeB(), d, d)
                    .scales(key.scaleA(), key.scaleB(), 0);
            return key.extra() == 0 ? s : s.amaxD(key.extra());
        });
        plan.run(null, b.address(), a.address(), out.address(), out.address(), 1f, accumulate ? 1f : 0f);
    }

    private void checkFp8Device() {
        if (computeCapability < 89) {
            throw new UnsupportedOperationException("FP8 GEMMs need compute capability 8.9 (Ada) or newer, this GPU is"
                    + " sm_" + computeCapability);
        }
    }

    /**
     * {@code dst (R,C) = fp8(src (R,C)·scale)} and {@code dstT (C,R)} its transpose, as {@code fp8Type} (saturating,
     * rounding bit-identical to {@link GpuOps#castToFp8}); returns {@code max |src|} (NaN ignored) for the tensor's
     * {@link io.accel4j.core.fp8.AmaxHistory} — a copy back to the host, so it waits for the work queued before.
     * The transposed codes are what {@link #fp8} needs for a backward pass: {@code dinp = dout·W} takes {@code Wᵀ}
     * as {@code b}, {@code dweight = doutᵀ·inp} takes {@code doutᵀ} as {@code a} and {@code inpᵀ} as {@code b}.
     */
    public float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R,
                                    int C, float scale) {
        return castTranspose.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }

    /**
     * {@code out (N,OC) = sInp·sW · q_inp (N,C) · q_wᵀ + bias} ({@link MatmulOps}' FP8 forward, {@code bias} may be
     * null): inp and weight cast as {@link #castTransposeToFp8} does with their histories' scales (the transposed
     * codes are not used forward), their amaxes left in device slots until {@link #flushAmaxes}, then an {@link #fp8}
     * GEMM that reads the dequantisation factors from the slots. Nothing waits for the GPU. FP8 GEMMs have no fp32
     * bias epilogue here, so a bias is first broadcast into {@code out} exactly (an fp32 GEMM of zeros with the bias
     * epilogue, {@code 0·0 + bias}) and the FP8 GEMM accumulates onto it. The FP8 rules apply: C a multiple of 16,
     * OC of 4; they are checked before anything is cast.
     */
    public void fp8Forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N,
                           int C, int OC, Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        GpuLaunch.positive("N", N); GpuLaunch.positive("C", C); GpuLaunch.positive("OC", OC);
        if (bias != null) {
            GpuLaunch.need("bias", bias, OC, 4);
        }
        GpuLaunch.need("inp", inp, (long) N * C, 4); GpuLaunch.need("weight", weight, (long) OC * C, 4);
        long nInp = (long) N * C, nW = (long) OC * C;
        long inpAt = 0, inpT = slice(nInp, 1), wAt = 2 * inpT, wT = wAt + slice(nW, 1);
        MemorySegment base = fp8Codes.view(wT + slice(nW, 1));
        AmaxHistory hInp = fp8.input(), hW = fp8.weight();
        MemorySegment qInp = base.asSlice(inpAt, nInp), qW = base.asSlice(wAt, nW);
        checkFp8(out, DType.FP32, qInp, hInp.format(), hInp.scaleInv(), qW, hW.format(), hW.scaleInv(), null, N, OC,
                C);
        checkFp8Device();
        cast(hInp, base, inpAt, inpT, inp, N, C);
        cast(hW, base, wAt, wT, weight, OC, C);
        boolean hasBias = bias != null;
        if (hasBias) {
            MemorySegment z = zeros.view(Math.max(N, OC) * (long) Float.BYTES);
            forward(out, z, z, bias, N, 1, OC, DType.FP32);
        }
        fp8Gemm(out, DType.FP32, hasBias, qInp, hInp.format(), amaxSlots.scaleInvAddress(hInp), qW, hW.format(),
                amaxSlots.scaleInvAddress(hW), null, N, OC, C);
    }

    /**
     * {@code dinp (N,C) += sDout·sW · q_dout (N,OC) · (q_wᵀ (C,OC))ᵀ}, {@code dweight (OC,C) += sDout·sInp ·
     * q_doutᵀ (OC,N) · (q_inpᵀ (C,N))ᵀ}, {@code dbias += Σ_rows dout} (fp32, may be null): dout, weight and inp cast
     * with their transposes as {@link #castTransposeToFp8} does (amaxes into device slots, as {@link #fp8Forward}),
     * then two {@link #fp8} GEMMs that add. The FP8 rules apply: OC and N multiples of 16, C of 4; they are checked
     * before anything is cast.
     */
    public void fp8Backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                            MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        GpuLaunch.positive("N", N); GpuLaunch.positive("C", C); GpuLaunch.positive("OC", OC);
        if (dbias != null) {
            GpuLaunch.need("dbias", dbias, OC, 4);
        }
        GpuLaunch.need("dout", dout, (long) N * OC, 4); GpuLaunch.need("inp", inp, (long) N * C, 4);
        GpuLaunch.need("weight", weight, (long) OC * C, 4);
        long nInp = (long) N * C, nW = (long) OC * C, nDout = (long) N * OC;
        long inpAt = 0, inpT = slice(nInp, 1), wAt = 2 * inpT, wT = wAt + slice(nW, 1), gAt = wT + slice(nW, 1);
        long gT = gAt + slice(nDout, 1);
        MemorySegment base = fp8Codes.view(gT + slice(nDout, 1));
        AmaxHistory hInp = fp8.input(), hW = fp8.weight(), hDout = fp8.gradOutput();
        MemorySegment qDout = base.asSlice(gAt, nDout), qDoutT = base.asSlice(gT, nDout);
        MemorySegment qWT = base.asSlice(wT, nW), qInpT = base.asSlice(inpT, nInp);
        checkFp8(dinp, DType.FP32, qDout, hDout.format(), hDout.scaleInv(), qWT, hW.format(), hW.scaleInv(), null, N,
                C, OC);
        checkFp8(dweight, DType.FP32, qDoutT, hDout.format(), hDout.scaleInv(), qInpT, hInp.format(),
                hInp.scaleInv(), null, OC, C, N);
        checkFp8Device();
        cast(hDout, base, gAt, gT, dout, N, OC);
        cast(hW, base, wAt, wT, weight, OC, C);
        cast(hInp, base, inpAt, inpT, inp, N, C);
        long sDout = amaxSlots.scaleInvAddress(hDout), sW = amaxSlots.scaleInvAddress(hW);
        long sInp = amaxSlots.scaleInvAddress(hInp);
        fp8Gemm(dinp, DType.FP32, true, qDout, hDout.format(), sDout, qWT, hW.format(), sW, null, N, C, OC);
        fp8Gemm(dweight, DType.FP32, true, qDoutT, hDout.format(), sDout, qInpT, hInp.format(), sInp, null, OC, C, N);
        if (dbias != null) {
            Kernels.MATMUL_BACKWARD_BIAS.launch(biasKernel, Dim.of((OC + 31) / 32), BIAS_BLOCK, 0, null,
                    dbias, dout, N, OC);
        }
    }

    /**
     * Queues the cast of {@code src} (R,C) with {@code h}'s scale into {@code base} at {@code at} and its transpose
     * at {@code atT}, then the reduction of its amax into {@code h}'s slot with {@code h}'s dequantisation factor.
     */
    private void cast(AmaxHistory h, MemorySegment base, long at, long atT, MemorySegment src, int R, int C) {
        long n = (long) R * C;
        int tiles = castTranspose.launch(base.asSlice(at, n), base.asSlice(atT, n), h.format(), src, R, C, h.scale());
        amaxSlots.record(h, castTranspose.partials(), tiles, h.scaleInv());
    }

    /**
     * Records the amaxes that {@link #fp8Forward} and {@link #fp8Backward} left in device slots into their
     * histories ({@link MatmulOps#flushAmaxes}): one device→host copy, which waits for the work queued so far;
     * nothing when none is pending.
     */
    public void flushAmaxes() {
        amaxSlots.flush();
    }

    /** Histories whose amaxes wait for {@link #flushAmaxes}. */
    int pendingAmaxes() {
        return amaxSlots.pending();
    }

    /** {@link #fp8}'s preconditions, checked without a GPU (the segments' addresses are only compared). */
    static void checkFp8(MemorySegment out, DType outType, MemorySegment a, DType aType, float aScaleInv,
                         MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut, int M, int N, int K) {
        Objects.requireNonNull(outType, "outType");
        Objects.requireNonNull(aType, "aType");
        Objects.requireNonNull(bType, "bType");
        GpuLaunch.positive("M", M); GpuLaunch.positive("N", N); GpuLaunch.positive("K", K);
        if (!aType.isFp8() || !bType.isFp8()) {
            throw new IllegalArgumentException("fp8 takes FP8_E4M3 or FP8_E5M2 operands, got a " + aType + ", b "
                    + bType);
        }
        if (aType == DType.FP8_E5M2 && bType == DType.FP8_E5M2) {
            throw new IllegalArgumentException("a and b cannot both be FP8_E5M2 (cuBLASLt has no E5M2 x E5M2 GEMM)");
        }
        if (outType != DType.FP32 && outType != DType.BF16) {
            throw new IllegalArgumentException("fp8 writes FP32 or BF16, got " + outType);
        }
        if (K % FP8_MULTIPLE != 0) {
            throw new IllegalArgumentException("K must be a multiple of " + FP8_MULTIPLE + " for FP8 (cuBLASLt), got "
                    + K);
        }
        if ((long) N * outType.byteSize() % 16 != 0) {
            throw new IllegalArgumentException("a row of out must be a multiple of 16 bytes for FP8 (cuBLASLt): N "
                    + N + " × " + outType.byteSize() + " bytes of " + outType);
        }
        scaleFactor("aScaleInv", aScaleInv);
        scaleFactor("bScaleInv", bScaleInv);
        GpuLaunch.need("a", a, (long) M * K, 1); GpuLaunch.need("b", b, (long) N * K, 1);
        GpuLaunch.need("out", out, (long) M * N, outType.byteSize());
        aligned16("a", a);
        aligned16("b", b);
        aligned16("out", out);
        if (amaxOut != null) {
            GpuLaunch.need("amaxOut", amaxOut, 1, 4);
        }
    }

    /** {@code cudaDataType} of a {@link DType}. */
    static int cudaType(DType t) {
        return switch (t) {
            case FP32 -> cublas_api_h.CUDA_R_32F;
            case BF16 -> cublas_api_h.CUDA_R_16BF;
            case FP16 -> cublas_api_h.CUDA_R_16F;
            case FP8_E4M3 -> cublas_api_h.CUDA_R_8F_E4M3;
            case FP8_E5M2 -> cublas_api_h.CUDA_R_8F_E5M2;
        };
    }

    static void scaleFactor(String name, float v) {
        if (!(v > 0 && v < Float.POSITIVE_INFINITY)) {
            throw new IllegalArgumentException(name + " must be finite and > 0, got " + v);
        }
    }

    private static void aligned16(String name, MemorySegment s) {
        if (s.address() % 16 != 0) {
            throw new IllegalArgumentException(name + " at 0x" + Long.toHexString(s.address()) + " is not 16-byte"
                    + " aligned, as an FP8 GEMM needs (cuBLASLt)");
        }
    }

    /** Bytes of a scratch slice of n elements of {@code bytesEach}, rounded up to {@value #SLICE_ALIGN}. */
    private static long slice(long n, int bytesEach) {
        return (n * bytesEach + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    }

    /** Queues {@code src} (n fp32) rounded to {@code type} into {@code base} at byte {@code at}; returns that view. */
    private MemorySegment round(MemorySegment base, long at, MemorySegment src, long n, DType type) {
        MemorySegment dst = base.asSlice(at, n * 2);
        int grid = (int) Math.min(CAST_MAX_BLOCKS, (n + CAST_BLOCK - 1) / CAST_BLOCK);
        KernelSignature s = type == DType.BF16 ? Kernels.CAST_F32_TO_BF16 : Kernels.CAST_F32_TO_F16;
        s.launch(type == DType.BF16 ? toBf16 : toF16, Dim.of(grid), Dim.of(CAST_BLOCK), 0, null, dst, src, n);
        return dst;
    }

    private static CublasLtMatmul.Spec spec(Key key) {
        return CublasLtMatmul.spec(key.m(), key.n(), key.k())
                .types(key.typeA(), key.typeB(), cublas_api_h.CUDA_R_32F, cublas_api_h.CUDA_R_32F)
                .alignments(key.alignA(), key.alignB(), key.alignC(), key.alignD());
    }

    private CublasLtMatmul plan(Key key, Function<Key, CublasLtMatmul.Spec> spec) {
        CublasLtMatmul p = plans.get(key);
        if (p == null) {
            p = CublasLtMatmul.plan(lt, spec.apply(key), workspace);
            plans.put(key, p);
        }
        return p;
    }

    private static int align(MemorySegment s) {
        return CublasLtMatmul.alignment(s.address());
    }

    @Override
    public void close() {
        plans.values().forEach(CublasLtMatmul::close);
        plans.clear();
        scratch.close();
        fp8Codes.close();
        zeros.close();
        amaxSlots.close();
        biasGrad.close();
        castTranspose.close();
        fp8Scales.close();
        workspace.close();
        lt.close();
        ownedModules.forEach(CudaModule::close);
    }
}
