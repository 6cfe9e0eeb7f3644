package io.accel4j.kernels;

import io.accel4j.cuda.CublasLtHandle;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@link GpuOps}' fp32 linear layer on cuBLASLt (FP32 compute, no TF32): a handle, a workspace, and the plans made so
 * far (cached by shape, bias address and operand alignments, least recently used closed beyond {@value #MAX_PLANS}).
 * Sizes are checked by the caller. Not thread-safe, like {@link GpuOps}.
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
 */
final class GpuMatmul implements AutoCloseable {

    /** cuBLASLt's recommended workspace for Hopper (NVIDIA's cuBLAS docs: 32 MiB). */
    static final long WORKSPACE_BYTES = 32L << 20;
    /** Plans kept: a GPT-2 step has a few per layer and pass, each distinct by bias address. */
    static final int MAX_PLANS = 512;

    private enum Kind { FORWARD, DINP, DWEIGHT }

    private record Key(Kind kind, int n, int c, int oc, long bias, int alignA, int alignB, int alignC, int alignD) {}

    private final CublasLtHandle lt;
    private final DeviceBuffer workspace;
    private final CudaKernel biasKernel;
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

    /** A handle and a workspace on {@code context}; {@code biasKernel} is {@code matmul_backward_bias}. */
    GpuMatmul(CudaContext context, CudaKernel biasKernel) {
        this.biasKernel = biasKernel;
        this.lt = CublasLtHandle.create(context);
        try {
            this.workspace = context.allocate(WORKSPACE_BYTES);
        } catch (RuntimeException e) {
            lt.close();
            throw e;
        }
    }

    /** {@code "cuBLASLt 120605"}. */
    String describe() {
        return "cuBLASLt " + lt.version();
    }

    /** {@code out (N,OC) = inp (N,C)·weightᵀ + bias}; {@code bias} may be null. */
    void forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C, int OC) {
        long b = bias == null ? 0 : bias.address();
        CublasLtMatmul plan = plan(new Key(Kind.FORWARD, N, C, OC, b, align(weight), align(inp), align(out),
                align(out)), key -> {
            CublasLtMatmul.Spec s = spec(key, OC, N, C).transpose(true, false);
            if (b != 0) {
                s.epilogue(cublasLt_h.CUBLASLT_EPILOGUE_BIAS).bias(b, cublas_api_h.CUDA_R_32F);
            }
            return s;
        });
        plan.run(null, weight.address(), inp.address(), out.address(), out.address(), 1f, 0f);
    }

    /** {@code dinp += dout·weight}, {@code dweight += doutᵀ·inp}, {@code dbias += Σ_rows dout} (dbias may be null). */
    void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                  MemorySegment inp, MemorySegment weight, int N, int C, int OC) {
        CublasLtMatmul dx = plan(new Key(Kind.DINP, N, C, OC, 0, align(weight), align(dout), align(dinp),
                align(dinp)), key -> spec(key, C, N, OC));
        dx.run(null, weight.address(), dout.address(), dinp.address(), dinp.address(), 1f, 1f);
        CublasLtMatmul dw = plan(new Key(Kind.DWEIGHT, N, C, OC, 0, align(inp), align(dout), align(dweight),
                align(dweight)), key -> spec(key, C, OC, N).transpose(false, true));
        dw.run(null, inp.address(), dout.address(), dweight.address(), dweight.address(), 1f, 1f);
        if (dbias != null) {
            Kernels.MATMUL_BACKWARD_BIAS.launch(biasKernel, Dim.of((OC + 31) / 32), Dim.of(32, 8), 0, null,
                    dbias, dout, N, OC);
        }
    }

    private static CublasLtMatmul.Spec spec(Key key, int m, int n, int k) {
        return CublasLtMatmul.spec(m, n, k).alignments(key.alignA(), key.alignB(), key.alignC(), key.alignD());
    }

    private CublasLtMatmul plan(Key key, java.util.function.Function<Key, CublasLtMatmul.Spec> spec) {
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
        workspace.close();
        lt.close();
    }
}
