package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.CudaModule;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * Linear layers and FP8 GEMMs on cuBLASLt (FP32 compute, no TF32): the facade {@link GpuOps} and the benchmarks
 * call, over one class per job sharing one {@link CublasLtPlans} (handle, workspace, plan cache). Every
 * {@link MemorySegment} is a device view (see {@link GpuOps#device}); work is queued on the default stream. Not
 * thread-safe.
 *
 * <p><b>API.</b> {@link #create} (its own PTX modules) or {@link GpuOps}' instance; then
 * <ul>
 *   <li>{@link #forward} / {@link #backward}: {@link MatmulOps}' linear layer with FP32, BF16 or FP16 operands
 *       ({@link LinearGpu}: the row-major ↔ column-major mapping and the roundings);</li>
 *   <li>{@link #forwardGelu} / {@link #backwardGelu}: {@link MatmulOps}' MLP matmuls with GELU fused on cuBLASLt's
 *       epilogues ({@link LinearGeluGpu}; see {@link #geluEpilogueRefusal}); they return false when cuBLASLt has no
 *       algorithm, and {@link GpuOps} then composes the unfused ops;</li>
 *   <li>{@link #fp8}, {@link #castTransposeToFp8}, {@link #fp8Forward} / {@link #fp8Backward}, {@link #flushAmaxes}:
 *       FP8 GEMMs and the linear layer with FP8 operands and delayed scaling ({@link Fp8LinearGpu}: the TN layout
 *       and the FP8 rules).</li>
 * </ul>
 */
public final class GpuMatmul implements AutoCloseable {

    /**
     * What an FP8 GEMM's K must be a multiple of (cuBLASLt): so {@link #fp8Forward} needs C, and {@link #fp8Backward}
     * OC and N, to be multiples of it.
     */
    public static final int FP8_MULTIPLE = Fp8LinearGpu.FP8_MULTIPLE;
    /** matmul_backward_bias's block ({@link LinearGpu#BIAS_BLOCK}). */
    static final Dim BIAS_BLOCK = LinearGpu.BIAS_BLOCK;

    private final List<CudaModule> ownedModules;
    private final CublasLtPlans plans;
    private final LinearGpu linear;
    private final LinearGeluGpu gelu;
    private final Fp8LinearGpu fp8;

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
     * A handle, a workspace and the kernels ({@code kernels} looks them up by signature, before anything is
     * allocated) on {@code context}; {@code ownedModules} are closed by {@link #close()} (empty when the caller owns
     * the modules).
     */
    GpuMatmul(CudaContext context, Function<KernelSignature, CudaKernel> kernels, List<CudaModule> ownedModules) {
        this.ownedModules = List.copyOf(ownedModules);
        CudaKernel bias = kernels.apply(Kernels.MATMUL_BACKWARD_BIAS);
        CudaKernel toBf16 = kernels.apply(Kernels.CAST_F32_TO_BF16);
        CudaKernel toF16 = kernels.apply(Kernels.CAST_F32_TO_F16);
        CudaKernel castTranspose = kernels.apply(Kernels.CAST_TRANSPOSE_F32_TO_FP8);
        CudaKernel amaxToSlot = kernels.apply(Kernels.FP8_AMAX_TO_SLOT);
        this.plans = new CublasLtPlans(context);
        try {
            this.linear = new LinearGpu(context, plans, bias, toBf16, toF16);
            this.gelu = new LinearGeluGpu(context, plans, linear);
            this.fp8 = new Fp8LinearGpu(context, plans, linear, castTranspose, amaxToSlot);
        } catch (RuntimeException e) {
            plans.close();
            throw e;
        }
    }

    /** {@code "cuBLASLt 120605"}. */
    public String describe() {
        return plans.describe();
    }

    /** {@link LinearGpu#forward}: {@code out (N,OC) = inp (N,C)·weightᵀ + bias} ({@code bias} may be null). */
    public void forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C,
                        int OC, DType operands) {
        linear.forward(out, inp, weight, bias, N, C, OC, operands);
    }

    /** {@link LinearGpu#backward}: {@code dinp += dout·weight}, {@code dweight += doutᵀ·inp}, {@code dbias += Σ dout}. */
    public void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                         MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        linear.backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
    }

    /** {@link LinearGeluGpu#geluEpilogueRefusal}: why the GELU epilogues cannot take {@code aux} with {@code ld}. */
    static String geluEpilogueRefusal(MemorySegment aux, int ld) {
        return LinearGeluGpu.geluEpilogueRefusal(aux, ld);
    }

    /**
     * {@link LinearGeluGpu#forwardGelu}: {@code pre = inp·weightᵀ + bias}, {@code out = gelu(pre)} in one GEMM.
     *
     * @return false, having changed no output, when cuBLASLt has no algorithm for the epilogue (remembered)
     */
    public boolean forwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                               MemorySegment bias, int N, int C, int OC, DType operands) {
        return gelu.forwardGelu(out, pre, inp, weight, bias, N, C, OC, operands);
    }

    /**
     * {@link LinearGeluGpu#backwardGelu}: {@code dpre = gelu'(pre)·(dout·weight)} in one GEMM, then dweight, dbias.
     *
     * @return false, having changed no output, when cuBLASLt has no algorithm for the epilogue (remembered)
     */
    public boolean backwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight, MemorySegment dbias,
                                MemorySegment dout, MemorySegment inp, MemorySegment pre, MemorySegment weight,
                                int N, int C, int OC, DType operands) {
        return gelu.backwardGelu(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC, operands);
    }

    /**
     * {@link Fp8LinearGpu#fp8}: {@code out (M,N) (+)= aScaleInv·bScaleInv · a (M,K) · b (N,K)ᵀ} on FP8 codes,
     * optionally writing {@code max |out|} to {@code amaxOut}.
     *
     * @throws IllegalArgumentException naming the argument and the numbers when an FP8 rule or a size does not hold
     */
    public void fp8(MemorySegment out, DType outType, boolean accumulate, MemorySegment a, DType aType,
                    float aScaleInv, MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut,
                    int M, int N, int K) {
        fp8.fp8(out, outType, accumulate, a, aType, aScaleInv, b, bType, bScaleInv, amaxOut, M, N, K);
    }

    /** {@link Fp8LinearGpu#checkFp8}: {@link #fp8}'s preconditions, checked without a GPU. */
    static void checkFp8(MemorySegment out, DType outType, MemorySegment a, DType aType, float aScaleInv,
                         MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut, int M, int N, int K) {
        Fp8LinearGpu.checkFp8(out, outType, a, aType, aScaleInv, b, bType, bScaleInv, amaxOut, M, N, K);
    }

    /**
     * {@code dst (R,C) = fp8(src (R,C)·scale)} and {@code dstT (C,R)} its transpose, as {@code fp8Type}; returns
     * {@code max |src|} (a copy back to the host, so it waits for the work queued before). See
     * {@link CastTransposeGpu}.
     */
    public float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R,
                                    int C, float scale) {
        return fp8.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }

    /** {@link Fp8LinearGpu#fp8Forward}: {@link MatmulOps}' FP8 forward, nothing waiting for the GPU. */
    public void fp8Forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N,
                           int C, int OC, Fp8Scaling fp8) {
        this.fp8.fp8Forward(out, inp, weight, bias, N, C, OC, fp8);
    }

    /** {@link Fp8LinearGpu#fp8Backward}: {@link MatmulOps}' FP8 backward, nothing waiting for the GPU. */
    public void fp8Backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                            MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        this.fp8.fp8Backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fp8);
    }

    /**
     * Records the amaxes that {@link #fp8Forward} and {@link #fp8Backward} left in device slots into their
     * histories ({@link MatmulOps#flushAmaxes}): one device→host copy, which waits for the work queued so far;
     * nothing when none is pending.
     */
    public void flushAmaxes() {
        fp8.flushAmaxes();
    }

    /** Histories whose amaxes wait for {@link #flushAmaxes}. */
    int pendingAmaxes() {
        return fp8.pendingAmaxes();
    }

    @Override
    public void close() {
        fp8.close();
        gelu.close();
        linear.close();
        plans.close();
        ownedModules.forEach(CudaModule::close);
    }
}
