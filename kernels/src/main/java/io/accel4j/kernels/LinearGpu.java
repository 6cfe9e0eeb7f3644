package io.accel4j.kernels;

import static io.accel4j.kernels.CublasLtPlans.align;
import static io.accel4j.kernels.CublasLtPlans.cudaType;

import io.accel4j.core.DType;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import io.accel4j.kernels.CublasLtPlans.Key;
import io.accel4j.kernels.CublasLtPlans.Kind;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * {@link MatmulOps}' linear layer with FP32, BF16 or FP16 operands on cuBLASLt (FP32 compute, no TF32), for
 * {@link GpuMatmul}: the GEMMs through {@link CublasLtPlans}, the bias gradient by matmul.cu's kernel, the rounded
 * operands in scratch of this object. Every {@link MemorySegment} is a device view (see {@link GpuOps#device}); work
 * is queued on the default stream. Not thread-safe.
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
 * </ul>
 *
 * <p><b>BF16/FP16 operands</b> ({@link MatmulOps}' contract): each fp32 operand is first rounded into device scratch
 * by cast.cu's kernels (round to nearest even, bit-identical to {@code Bf16.fromFloat}/{@code Fp16.fromFloat}, fp16
 * overflowing to ±inf), then cuBLASLt multiplies the rounded values with FP32 compute into fp32 outputs; bias and
 * dbias stay fp32 (dbias sums the unrounded dout). The CPU GEMM differs only in the order of the fp32 additions.
 *
 * <p>The checks, the roundings and the weight/bias gradients are also {@link LinearGeluGpu}'s, whose fused GEMMs
 * replace the forward and the dinp one.
 */
final class LinearGpu implements AutoCloseable {

    /** matmul_backward_bias's block: 32 columns × 8 row phases (the kernel assumes this shape); grid ceil(OC / 32). */
    static final Dim BIAS_BLOCK = Dim.of(32, 8);
    private static final int CAST_BLOCK = 256;
    private static final int CAST_MAX_BLOCKS = 1024;

    private final CublasLtPlans plans;
    private final CudaKernel biasKernel;
    private final CudaKernel toBf16;
    private final CudaKernel toF16;
    /** The rounded operands of a BF16/FP16 product, grown to the largest call so far. */
    private final ScratchBuffer scratch;

    LinearGpu(CudaContext context, CublasLtPlans plans, CudaKernel biasKernel, CudaKernel toBf16, CudaKernel toF16) {
        this.plans = Objects.requireNonNull(plans, "plans");
        this.biasKernel = Objects.requireNonNull(biasKernel, "biasKernel");
        this.toBf16 = Objects.requireNonNull(toBf16, "toBf16");
        this.toF16 = Objects.requireNonNull(toF16, "toF16");
        this.scratch = ScratchBuffer.of(context);
    }

    /**
     * {@code out (N,OC) = inp (N,C)·weightᵀ + bias} with products of {@code operands} precision (FP32, BF16 or FP16,
     * see {@link MatmulOps}); {@code bias} (OC) may be null.
     */
    void forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C,
                 int OC, DType operands) {
        checkForward(out, inp, weight, bias, N, C, OC, operands);
        Operands r = roundForward(inp, weight, N, C, OC, operands);
        MemorySegment w = r.w(), x = r.x();
        long b = bias == null ? 0 : bias.address();
        int t = cudaType(operands);
        CublasLtMatmul plan = plans.plan(new Key(Kind.FORWARD, OC, N, C, t, t, cublas_api_h.CUDA_R_32F, b, 0, 0, 0,
                align(w), align(x), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = CublasLtPlans.spec(key).transpose(true, false);
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
    void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                  MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        checkBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        Operands r = roundBackward(dout, inp, weight, N, C, OC, operands);
        int t = cudaType(operands), f32 = cublas_api_h.CUDA_R_32F;
        CublasLtMatmul dx = plans.plan(new Key(Kind.DINP, C, N, OC, t, t, f32, 0, 0, 0, 0, align(r.w()),
                align(r.g()), align(dinp), align(dinp)), CublasLtPlans::spec);
        dx.run(null, r.w().address(), r.g().address(), dinp.address(), dinp.address(), 1f, 1f);
        weightAndBiasGradients(dweight, dbias, dout, r, N, C, OC, operands);
    }

    /** {@link #forward}'s size checks (also {@link LinearGeluGpu#forwardGelu}'s). */
    static void checkForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                             int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        MatmulOps.checkSizes(N, C, OC);
        GpuLaunch.need("out", out, (long) N * OC, 4); GpuLaunch.need("inp", inp, (long) N * C, 4);
        GpuLaunch.need("weight", weight, (long) OC * C, 4);
        if (bias != null) {
            GpuLaunch.need("bias", bias, OC, 4);
        }
    }

    /** {@link #backward}'s size checks (dinp: the input gradient, {@code dpre} for the fused GELU backward). */
    static void checkBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                              MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        MatmulOps.checkOperands(operands);
        MatmulOps.checkSizes(N, C, OC);
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
    record Operands(MemorySegment w, MemorySegment x, MemorySegment g) {}

    /** The forward operands of {@code operands} precision (BF16/FP16: queued roundings into {@link #scratch}). */
    Operands roundForward(MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands) {
        if (operands == DType.FP32) {
            return new Operands(weight, inp, null);
        }
        long wAt = 0, xAt = ScratchBuffer.slice((long) OC * C, 2);
        MemorySegment base = scratch.view(xAt + (long) N * C * 2);
        return new Operands(round(base, wAt, weight, (long) OC * C, operands),
                round(base, xAt, inp, (long) N * C, operands), null);
    }

    /** The backward operands of {@code operands} precision (BF16/FP16: queued roundings into {@link #scratch}). */
    Operands roundBackward(MemorySegment dout, MemorySegment inp, MemorySegment weight, int N, int C, int OC,
                           DType operands) {
        if (operands == DType.FP32) {
            return new Operands(weight, inp, dout);
        }
        long wAt = 0, xAt = ScratchBuffer.slice((long) OC * C, 2), gAt = xAt + ScratchBuffer.slice((long) N * C, 2);
        MemorySegment base = scratch.view(gAt + (long) N * OC * 2);
        return new Operands(round(base, wAt, weight, (long) OC * C, operands),
                round(base, xAt, inp, (long) N * C, operands), round(base, gAt, dout, (long) N * OC, operands));
    }

    /** {@code dweight += doutᵀ·inp} (the rounded operands) and {@code dbias += Σ_rows dout} (the fp32 dout). */
    void weightAndBiasGradients(MemorySegment dweight, MemorySegment dbias, MemorySegment dout, Operands r,
                                int N, int C, int OC, DType operands) {
        int t = cudaType(operands), f32 = cublas_api_h.CUDA_R_32F;
        CublasLtMatmul dw = plans.plan(new Key(Kind.DWEIGHT, C, OC, N, t, t, f32, 0, 0, 0, 0, align(r.x()),
                align(r.g()), align(dweight), align(dweight)), key -> CublasLtPlans.spec(key).transpose(false, true));
        dw.run(null, r.x().address(), r.g().address(), dweight.address(), dweight.address(), 1f, 1f);
        if (dbias != null) {
            addColumnSums(dbias, dout, N, OC);
        }
    }

    /** {@code dst (n) += Σ_rows src (rows, n)}: matmul.cu's deterministic bias-gradient kernel. */
    void addColumnSums(MemorySegment dst, MemorySegment src, int rows, int n) {
        Kernels.MATMUL_BACKWARD_BIAS.launch(biasKernel, Dim.of((n + 31) / 32), BIAS_BLOCK, 0, null, dst, src, rows, n);
    }

    /** Queues {@code src} (n fp32) rounded to {@code type} into {@code base} at byte {@code at}; returns that view. */
    private MemorySegment round(MemorySegment base, long at, MemorySegment src, long n, DType type) {
        MemorySegment dst = base.asSlice(at, n * 2);
        int grid = (int) Math.min(CAST_MAX_BLOCKS, (n + CAST_BLOCK - 1) / CAST_BLOCK);
        KernelSignature s = type == DType.BF16 ? Kernels.CAST_F32_TO_BF16 : Kernels.CAST_F32_TO_F16;
        s.launch(type == DType.BF16 ? toBf16 : toF16, Dim.of(grid), Dim.of(CAST_BLOCK), 0, null, dst, src, n);
        return dst;
    }

    @Override
    public void close() {
        scratch.close();
    }
}
