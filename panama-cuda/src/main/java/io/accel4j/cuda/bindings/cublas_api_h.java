package io.accel4j.cuda.bindings;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * cuBLAS ({@code cublas_api.h}, CUDA 12/13) as jextract shapes it: a static method per function, by the real
 * symbol ({@code cublasCreate} → {@code cublasCreate_v2}), with a holder owning its {@link FunctionDescriptor}, its C
 * prototype and a downcall handle created on the first call (loading this class touches no library; without
 * {@code libcublas} a call throws {@link io.accel4j.cuda.CudaException} listing where it looked). Only GEMM and
 * what it needs are bound. {@code CublasHeaderCheckTest} compiles them against {@code cublas_api.h} where found.
 */
public final class cublas_api_h {

    private cublas_api_h() {}

    public static final ValueLayout.OfInt C_INT = ValueLayout.JAVA_INT;
    public static final ValueLayout.OfLong C_LONG_LONG = ValueLayout.JAVA_LONG;
    public static final AddressLayout C_POINTER = ValueLayout.ADDRESS;

    // typedefs (name = the C type; checked with sizeof)
    public static final ValueLayout.OfInt cublasStatus_t = C_INT;
    public static final ValueLayout.OfInt cublasOperation_t = C_INT;
    public static final ValueLayout.OfInt cublasMath_t = C_INT;
    public static final ValueLayout.OfInt cublasComputeType_t = C_INT;
    public static final ValueLayout.OfInt cublasGemmAlgo_t = C_INT;
    public static final ValueLayout.OfInt cudaDataType = C_INT;
    public static final AddressLayout cublasHandle_t = C_POINTER;
    public static final AddressLayout cudaStream_t = C_POINTER;

    // cublasStatus_t
    public static final int CUBLAS_STATUS_SUCCESS = 0;
    public static final int CUBLAS_STATUS_NOT_INITIALIZED = 1;
    public static final int CUBLAS_STATUS_ALLOC_FAILED = 3;
    public static final int CUBLAS_STATUS_INVALID_VALUE = 7;
    public static final int CUBLAS_STATUS_ARCH_MISMATCH = 8;
    public static final int CUBLAS_STATUS_EXECUTION_FAILED = 13;
    public static final int CUBLAS_STATUS_NOT_SUPPORTED = 15;

    // cublasOperation_t
    public static final int CUBLAS_OP_N = 0;
    public static final int CUBLAS_OP_T = 1;

    // cublasMath_t
    public static final int CUBLAS_DEFAULT_MATH = 0;
    public static final int CUBLAS_PEDANTIC_MATH = 2;
    public static final int CUBLAS_TF32_TENSOR_OP_MATH = 3;

    // cublasComputeType_t
    public static final int CUBLAS_COMPUTE_32F = 68;
    public static final int CUBLAS_COMPUTE_32F_PEDANTIC = 69;
    public static final int CUBLAS_COMPUTE_32F_FAST_16BF = 75;
    public static final int CUBLAS_COMPUTE_32F_FAST_TF32 = 77;

    // cublasGemmAlgo_t
    public static final int CUBLAS_GEMM_DEFAULT = -1;

    // cudaDataType (library_types.h)
    public static final int CUDA_R_32F = 0;
    public static final int CUDA_R_16F = 2;
    public static final int CUDA_R_16BF = 14;
    public static final int CUDA_R_8F_E4M3 = 28;
    public static final int CUDA_R_8F_E5M2 = 29;

    private static final class cublasCreate_v2 {
        static final String PROTOTYPE = "cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublas("cublasCreate_v2", DESC);
    }

    /** {@code cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)} */
    public static int cublasCreate_v2(MemorySegment handle) {
        try {
            return (int) cublasCreate_v2.HANDLE.handle().invokeExact(handle);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasDestroy_v2 {
        static final String PROTOTYPE = "cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublas("cublasDestroy_v2", DESC);
    }

    /** {@code cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)} */
    public static int cublasDestroy_v2(MemorySegment handle) {
        try {
            return (int) cublasDestroy_v2.HANDLE.handle().invokeExact(handle);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasSetStream_v2 {
        static final String PROTOTYPE = "cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.cublas("cublasSetStream_v2", DESC);
    }

    /** {@code cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)} */
    public static int cublasSetStream_v2(MemorySegment handle, MemorySegment streamId) {
        try {
            return (int) cublasSetStream_v2.HANDLE.handle().invokeExact(handle, streamId);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasSetMathMode {
        static final String PROTOTYPE = "cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT);
        static final Downcall HANDLE = Downcall.cublas("cublasSetMathMode", DESC);
    }

    /** {@code cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)} */
    public static int cublasSetMathMode(MemorySegment handle, int mode) {
        try {
            return (int) cublasSetMathMode.HANDLE.handle().invokeExact(handle, mode);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasGetStatusName {
        static final String PROTOTYPE = "const char *cublasGetStatusName(cublasStatus_t status)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(C_POINTER, cublasStatus_t);
        static final Downcall HANDLE = Downcall.cublas("cublasGetStatusName", DESC);
    }

    /** {@code const char *cublasGetStatusName(cublasStatus_t status)} */
    public static MemorySegment cublasGetStatusName(int status) {
        try {
            return (MemorySegment) cublasGetStatusName.HANDLE.handle().invokeExact(status);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasGetStatusString {
        static final String PROTOTYPE = "const char *cublasGetStatusString(cublasStatus_t status)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(C_POINTER, cublasStatus_t);
        static final Downcall HANDLE = Downcall.cublas("cublasGetStatusString", DESC);
    }

    /** {@code const char *cublasGetStatusString(cublasStatus_t status)} */
    public static MemorySegment cublasGetStatusString(int status) {
        try {
            return (MemorySegment) cublasGetStatusString.HANDLE.handle().invokeExact(status);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasGemmEx {
        static final String PROTOTYPE = "cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_INT, C_INT, C_INT, C_INT, C_POINTER, C_POINTER, C_INT, C_INT, C_POINTER, C_INT, C_INT, C_POINTER, C_POINTER, C_INT, C_INT, C_INT, C_INT);
        static final Downcall HANDLE = Downcall.cublas("cublasGemmEx", DESC);
    }

    /** {@code cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)} */
    public static int cublasGemmEx(MemorySegment handle, int transa, int transb, int m, int n, int k, MemorySegment alpha, MemorySegment A, int Atype, int lda, MemorySegment B, int Btype, int ldb, MemorySegment beta, MemorySegment C, int Ctype, int ldc, int computeType, int algo) {
        try {
            return (int) cublasGemmEx.HANDLE.handle().invokeExact(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasGemmStridedBatchedEx {
        static final String PROTOTYPE = "cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_INT, C_INT, C_INT, C_INT, C_POINTER, C_POINTER, C_INT, C_INT, C_LONG_LONG, C_POINTER, C_INT, C_INT, C_LONG_LONG, C_POINTER, C_POINTER, C_INT, C_INT, C_LONG_LONG, C_INT, C_INT, C_INT);
        static final Downcall HANDLE = Downcall.cublas("cublasGemmStridedBatchedEx", DESC);
    }

    /** {@code cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)} */
    public static int cublasGemmStridedBatchedEx(MemorySegment handle, int transa, int transb, int m, int n, int k, MemorySegment alpha, MemorySegment A, int Atype, int lda, long strideA, MemorySegment B, int Btype, int ldb, long strideB, MemorySegment beta, MemorySegment C, int Ctype, int ldc, long strideC, int batchCount, int computeType, int algo) {
        try {
            return (int) cublasGemmStridedBatchedEx.HANDLE.handle().invokeExact(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
