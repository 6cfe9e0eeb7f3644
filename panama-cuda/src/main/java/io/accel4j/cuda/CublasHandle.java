package io.accel4j.cuda;

import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A cuBLAS handle ({@code cublasCreate_v2}) bound to a context, destroyed by {@link #close()}. GEMMs are cuBLAS's
 * column-major ones: {@code C (m×n) = alpha·op(A)·op(B) + beta·C} with {@code op(A)} m×k and {@code op(B)} k×n;
 * a row-major product {@code Y = X·Wᵀ} is the column-major {@code Yᵀ = W·Xᵀ}, i.e. {@code gemm(T, N, …)} with the
 * operands swapped. Inputs FP32, BF16 or FP16 ({@code CUDA_R_32F}, {@code CUDA_R_16BF}, {@code CUDA_R_16F}), C FP32
 * or, with 16-bit inputs, of their type; FP32 compute, scalars on the host.
 */
public final class CublasHandle extends NativeResource {

    private final CudaContext context;
    private final MemorySegment handle;

    private CublasHandle(CudaContext context, MemorySegment handle) {
        this.context = context;
        this.handle = handle;
    }

    /** A handle for {@code context}. */
    public static CublasHandle create(CudaContext context) {
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
            check("cublasCreate_v2", cublas_api_h.cublasCreate_v2(p));
            return new CublasHandle(context, p.get(ValueLayout.ADDRESS, 0));
        }
    }

    /** Queues later calls on {@code stream} ({@code null}: the default stream). */
    public void setStream(Stream stream) {
        ensureOpen();
        context.makeCurrent();
        check("cublasSetStream_v2", cublas_api_h.cublasSetStream_v2(handle, Stream.handle(stream)));
    }

    /** {@code CUBLAS_DEFAULT_MATH}, {@code CUBLAS_PEDANTIC_MATH} or {@code CUBLAS_TF32_TENSOR_OP_MATH}. */
    public void setMathMode(int mode) {
        ensureOpen();
        context.makeCurrent();
        check("cublasSetMathMode", cublas_api_h.cublasSetMathMode(handle, mode));
    }

    /** One column-major GEMM with FP32 compute ({@code cublasGemmEx}); {@code c} is FP32. */
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     DeviceBuffer a, int aType, int lda, DeviceBuffer b, int bType, int ldb,
                     float beta, DeviceBuffer c, int ldc) {
        gemm(transA, transB, m, n, k, alpha, a, aType, lda, b, bType, ldb, beta, c, cublas_api_h.CUDA_R_32F, ldc);
    }

    /**
     * {@link #gemm(boolean, boolean, int, int, int, float, DeviceBuffer, int, int, DeviceBuffer, int, int, float,
     * DeviceBuffer, int)} with {@code c} of {@code cType}: FP32, or the inputs' 16-bit type.
     */
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     DeviceBuffer a, int aType, int lda, DeviceBuffer b, int bType, int ldb,
                     float beta, DeviceBuffer c, int cType, int ldc) {
        batched(transA, transB, m, n, k, alpha, a, aType, lda, 0, b, bType, ldb, 0, beta, c, cType, ldc, 0, 1);
    }

    /**
     * {@code batch} GEMMs, operand {@code i} at element offset {@code i·stride} ({@code cublasGemmStridedBatchedEx};
     * {@link #gemm} for one).
     */
    public void gemmStridedBatched(boolean transA, boolean transB, int m, int n, int k, float alpha,
                                   DeviceBuffer a, int aType, int lda, long strideA,
                                   DeviceBuffer b, int bType, int ldb, long strideB,
                                   float beta, DeviceBuffer c, int ldc, long strideC, int batch) {
        batched(transA, transB, m, n, k, alpha, a, aType, lda, strideA, b, bType, ldb, strideB, beta, c,
                cublas_api_h.CUDA_R_32F, ldc, strideC, batch);
    }

    private void batched(boolean transA, boolean transB, int m, int n, int k, float alpha,
                         DeviceBuffer a, int aType, int lda, long strideA, DeviceBuffer b, int bType, int ldb,
                         long strideB, float beta, DeviceBuffer c, int cType, int ldc, long strideC, int batch) {
        ensureOpen();
        if (cType != cublas_api_h.CUDA_R_32F && (cType != aType || cType != bType)) {
            throw new IllegalArgumentException("c must be CUDA_R_32F or the inputs' 16-bit type, got cudaDataType "
                    + cType + " for a " + aType + ", b " + bType);
        }
        if (m < 1 || n < 1 || k < 1 || batch < 1) {
            throw new IllegalArgumentException("m, n, k, batch must be >= 1, got " + m + ", " + n + ", " + k + ", "
                    + batch);
        }
        fits("a", a, aType, lda, transA ? m : k, strideA, batch);
        fits("b", b, bType, ldb, transB ? k : n, strideB, batch);
        fits("c", c, cType, ldc, n, strideC, batch);
        if (lda < (transA ? k : m) || ldb < (transB ? n : k) || ldc < m) {
            throw new IllegalArgumentException("leading dimensions too small: lda " + lda + ", ldb " + ldb + ", ldc "
                    + ldc + " for m " + m + ", n " + n + ", k " + k);
        }
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pa = arena.allocateFrom(ValueLayout.JAVA_FLOAT, alpha);
            MemorySegment pb = arena.allocateFrom(ValueLayout.JAVA_FLOAT, beta);
            int opA = transA ? cublas_api_h.CUBLAS_OP_T : cublas_api_h.CUBLAS_OP_N;
            int opB = transB ? cublas_api_h.CUBLAS_OP_T : cublas_api_h.CUBLAS_OP_N;
            MemorySegment da = MemorySegment.ofAddress(a.address());
            MemorySegment db = MemorySegment.ofAddress(b.address());
            MemorySegment dc = MemorySegment.ofAddress(c.address());
            int compute = cublas_api_h.CUBLAS_COMPUTE_32F;
            if (batch == 1) {
                check("cublasGemmEx", cublas_api_h.cublasGemmEx(handle, opA, opB, m, n, k, pa, da, aType, lda,
                        db, bType, ldb, pb, dc, cType, ldc, compute, cublas_api_h.CUBLAS_GEMM_DEFAULT));
            } else {
                check("cublasGemmStridedBatchedEx", cublas_api_h.cublasGemmStridedBatchedEx(handle, opA, opB, m, n, k,
                        pa, da, aType, lda, strideA, db, bType, ldb, strideB, pb, dc, cType, ldc,
                        strideC, batch, compute, cublas_api_h.CUBLAS_GEMM_DEFAULT));
            }
        }
    }

    /** Bytes per element of a {@code cudaDataType} this class accepts. */
    static int elementBytes(int type) {
        return switch (type) {
            case cublas_api_h.CUDA_R_32F -> 4;
            case cublas_api_h.CUDA_R_16BF, cublas_api_h.CUDA_R_16F -> 2;
            default -> throw new IllegalArgumentException("unsupported cudaDataType " + type
                    + " (CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F)");
        };
    }

    /** The last matrix of the batch (ld × cols elements, column-major) must end inside the buffer. */
    private static void fits(String name, DeviceBuffer buf, int type, int ld, int cols, long stride, int batch) {
        long elements = (long) ld * (cols - 1) + ld + stride * (batch - 1);
        long bytes = elements * elementBytes(type);
        if (bytes > buf.byteSize()) {
            throw new IllegalArgumentException(name + " needs " + bytes + " bytes, " + buf + " holds " + buf.byteSize());
        }
    }

    /** Throws a {@link CudaException} with cuBLAS's status name and message unless {@code status} is success. */
    static void check(String call, int status) {
        if (status != cublas_api_h.CUBLAS_STATUS_SUCCESS) {
            throw new CudaException(call, status, string(cublas_api_h.cublasGetStatusName(status)),
                    string(cublas_api_h.cublasGetStatusString(status)));
        }
    }

    @SuppressWarnings("restricted") // reinterpret: cuBLAS returns a NUL-terminated static string
    private static String string(MemorySegment s) {
        return s.equals(MemorySegment.NULL) ? "(unknown)" : s.reinterpret(4096).getString(0);
    }

    @Override
    String describe() {
        return "CublasHandle(" + handle.address() + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cublasDestroy_v2", cublas_api_h.cublasDestroy_v2(handle));
    }
}
