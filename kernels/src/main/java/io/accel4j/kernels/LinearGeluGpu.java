package io.accel4j.kernels;

import static io.accel4j.kernels.CublasLtPlans.align;
import static io.accel4j.kernels.CublasLtPlans.cudaType;

import io.accel4j.core.DType;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import io.accel4j.kernels.CublasLtPlans.Key;
import io.accel4j.kernels.CublasLtPlans.Kind;
import io.accel4j.kernels.LinearGpu.Operands;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * {@link MatmulOps}' MLP matmuls with GELU fused, for {@link GpuMatmul}: cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD
 * epilogues (aux = the fp32 pre-activation, ld a multiple of 8: see {@link #geluEpilogueRefusal}) on
 * {@link LinearGpu}'s checks, roundings and weight/bias gradients. Each returns false, having changed no output,
 * when cuBLASLt has no algorithm for its epilogue ({@link CublasLtPlans#fusedPlan}, remembered); {@link GpuOps} then
 * composes the unfused ops. Not thread-safe.
 */
final class LinearGeluGpu implements AutoCloseable {

    private final CublasLtPlans plans;
    private final LinearGpu linear;
    /** The bias gradient DGELU_BGRAD overwrites, before {@link #backwardGelu} adds it to the caller's. */
    private final ScratchBuffer biasGrad;

    LinearGeluGpu(CudaContext context, CublasLtPlans plans, LinearGpu linear) {
        this.plans = Objects.requireNonNull(plans, "plans");
        this.linear = Objects.requireNonNull(linear, "linear");
        this.biasGrad = ScratchBuffer.of(context);
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
    boolean forwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                        MemorySegment bias, int N, int C, int OC, DType operands) {
        LinearGpu.checkForward(out, inp, weight, bias, N, C, OC, operands);
        GpuLaunch.need("pre", pre, (long) N * OC, 4);
        refuseAux(pre, OC);
        Operands r = linear.roundForward(inp, weight, N, C, OC, operands);
        MemorySegment w = r.w(), x = r.x();
        long b = bias == null ? 0 : bias.address(), aux = pre.address();
        int t = cudaType(operands);
        CublasLtMatmul plan = plans.fusedPlan(new Key(Kind.FORWARD_GELU, OC, N, C, t, t, cublas_api_h.CUDA_R_32F, b,
                aux, 0, 0, align(w), align(x), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = CublasLtPlans.spec(key).transpose(true, false).aux(aux, OC);
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
     * it into dpreBias (a sum over one row); then dweight and dbias as {@link LinearGpu#backward}.
     *
     * @return false, having changed no output, when cuBLASLt has no algorithm for this epilogue (remembered)
     * @throws IllegalArgumentException for sizes, or when {@link #geluEpilogueRefusal} refuses {@code pre}
     */
    boolean backwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight, MemorySegment dbias,
                         MemorySegment dout, MemorySegment inp, MemorySegment pre, MemorySegment weight,
                         int N, int C, int OC, DType operands) {
        LinearGpu.checkBackward(dpre, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        GpuLaunch.need("pre", pre, (long) N * C, 4);
        if (dpreBias != null) {
            GpuLaunch.need("dpreBias", dpreBias, C, 4);
        }
        refuseAux(pre, C);
        Operands r = linear.roundBackward(dout, inp, weight, N, C, OC, operands);
        long aux = pre.address(), bg = dpreBias == null ? 0 : biasGrad.view((long) C * 4).address();
        int t = cudaType(operands);
        CublasLtMatmul dx = plans.fusedPlan(new Key(Kind.DINP_DGELU, C, N, OC, t, t, cublas_api_h.CUDA_R_32F, bg,
                aux, 0, 0, align(r.w()), align(r.g()), align(dpre), align(dpre)), key -> {
            CublasLtMatmul.Spec s = CublasLtPlans.spec(key).aux(aux, C);
            return bg == 0 ? s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU)
                    : s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU_BGRAD).bias(bg, cublas_api_h.CUDA_R_32F);
        });
        if (dx == null) {
            return false;
        }
        dx.run(null, r.w().address(), r.g().address(), dpre.address(), dpre.address(), 1f, 0f);
        if (dpreBias != null) {
            linear.addColumnSums(dpreBias, biasGrad.view((long) C * 4), 1, C);
        }
        linear.weightAndBiasGradients(dweight, dbias, dout, r, N, C, OC, operands);
        return true;
    }

    private static void refuseAux(MemorySegment aux, int ld) {
        String why = geluEpilogueRefusal(aux, ld);
        if (why != null) {
            throw new IllegalArgumentException("cuBLASLt's GELU epilogue cannot take this call: " + why);
        }
    }

    @Override
    public void close() {
        biasGrad.close();
    }
}
