package io.accel4j.cuda.bindings;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * cuBLASLt ({@code cublasLt.h}, CUDA 12/13) as jextract shapes it: a static method per function with a holder owning
 * its {@link FunctionDescriptor}, its C prototype and a downcall handle created on the first call (loading this class
 * touches no library; without {@code libcublasLt} a call throws {@link io.accel4j.cuda.CudaException} listing where
 * it looked). Only what {@link io.accel4j.cuda.CublasLtMatmul} uses is bound; {@code cublasStatus_t},
 * {@code cublasOperation_t}, {@code cublasComputeType_t} and {@code cudaDataType} values are in {@link cublas_api_h}.
 *
 * <p>Every value and layout here was copied from, and checked by hand against, the CUDA 12.6 {@code cublasLt.h}
 * ("Copyright 1993-2022", cuBLAS 12.6; a public copy is {@code zspace/system.cuda-12.6/include/cublasLt.h}). The
 * enums are append-only across cuBLAS 12.x and 13 releases; {@code CublasLtHeaderCheckTest} compiles every prototype,
 * constant, typedef size and struct offset against the installed {@code cublasLt.h} wherever one is found.
 */
public final class cublasLt_h {

    private cublasLt_h() {}

    public static final ValueLayout.OfInt C_INT = ValueLayout.JAVA_INT;
    public static final ValueLayout.OfLong C_LONG = ValueLayout.JAVA_LONG;
    public static final ValueLayout.OfFloat C_FLOAT = ValueLayout.JAVA_FLOAT;
    public static final AddressLayout C_POINTER = ValueLayout.ADDRESS;

    // typedefs (name = the C type; checked with sizeof, structs with offsetof per member)
    public static final ValueLayout.OfInt cublasStatus_t = C_INT;
    public static final ValueLayout.OfInt cublasLtMatmulDescAttributes_t = C_INT;
    public static final ValueLayout.OfInt cublasLtMatrixLayoutAttribute_t = C_INT;
    public static final ValueLayout.OfInt cublasLtMatmulPreferenceAttributes_t = C_INT;
    public static final ValueLayout.OfInt cublasLtEpilogue_t = C_INT;
    public static final ValueLayout.OfLong size_t = C_LONG;
    public static final AddressLayout cublasLtHandle_t = C_POINTER;
    public static final AddressLayout cublasLtMatmulDesc_t = C_POINTER;
    public static final AddressLayout cublasLtMatrixLayout_t = C_POINTER;
    public static final AddressLayout cublasLtMatmulPreference_t = C_POINTER;
    public static final AddressLayout cudaStream_t = C_POINTER;

    /** {@code typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;} (semi-opaque, copied as bytes). */
    public static final StructLayout cublasLtMatmulAlgo_t = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(8, C_LONG).withName("data")).withName("cublasLtMatmulAlgo_t");

    /**
     * {@code typedef struct { cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state; float wavesCount;
     * int reserved[4]; } cublasLtMatmulHeuristicResult_t;}: offsets 0, 64, 72, 76, 80; 96 bytes.
     */
    public static final StructLayout cublasLtMatmulHeuristicResult_t = MemoryLayout.structLayout(
            cublasLtMatmulAlgo_t.withName("algo"),
            C_LONG.withName("workspaceSize"),
            C_INT.withName("state"),
            C_FLOAT.withName("wavesCount"),
            MemoryLayout.sequenceLayout(4, C_INT).withName("reserved")).withName("cublasLtMatmulHeuristicResult_t");

    // cublasLtMatrixLayoutAttribute_t
    public static final int CUBLASLT_MATRIX_LAYOUT_TYPE = 0;
    public static final int CUBLASLT_MATRIX_LAYOUT_ORDER = 1;
    public static final int CUBLASLT_MATRIX_LAYOUT_ROWS = 2;
    public static final int CUBLASLT_MATRIX_LAYOUT_COLS = 3;
    public static final int CUBLASLT_MATRIX_LAYOUT_LD = 4;
    public static final int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
    public static final int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;

    // cublasLtOrder_t
    public static final int CUBLASLT_ORDER_COL = 0;
    public static final int CUBLASLT_ORDER_ROW = 1;

    // cublasLtMatmulDescAttributes_t (the value's C type in the comment: SetAttribute's sizeInBytes must match it)
    public static final int CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0;          // int32_t
    public static final int CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1;            // int32_t
    public static final int CUBLASLT_MATMUL_DESC_POINTER_MODE = 2;          // int32_t
    public static final int CUBLASLT_MATMUL_DESC_TRANSA = 3;                // int32_t
    public static final int CUBLASLT_MATMUL_DESC_TRANSB = 4;                // int32_t
    public static final int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;              // uint32_t
    public static final int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;          // void *
    public static final int CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10;    // int64_t
    public static final int CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11; // void *
    public static final int CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12;      // int64_t
    public static final int CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17;      // const void *
    public static final int CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18;      // const void *
    public static final int CUBLASLT_MATMUL_DESC_C_SCALE_POINTER = 19;      // const void *
    public static final int CUBLASLT_MATMUL_DESC_D_SCALE_POINTER = 20;      // const void *
    public static final int CUBLASLT_MATMUL_DESC_AMAX_D_POINTER = 21;       // void *
    public static final int CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22; // int32_t
    public static final int CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25;           // int8_t
    public static final int CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26;       // int32_t

    // cublasLtEpilogue_t
    public static final int CUBLASLT_EPILOGUE_DEFAULT = 1;
    public static final int CUBLASLT_EPILOGUE_RELU = 2;
    public static final int CUBLASLT_EPILOGUE_BIAS = 4;
    public static final int CUBLASLT_EPILOGUE_GELU = 32;
    public static final int CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128;
    public static final int CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4;
    public static final int CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4;
    public static final int CUBLASLT_EPILOGUE_DGELU = 64 | 128;
    public static final int CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16;
    public static final int CUBLASLT_EPILOGUE_BGRADA = 256;
    public static final int CUBLASLT_EPILOGUE_BGRADB = 512;

    // cublasLtMatmulPreferenceAttributes_t
    public static final int CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0;           // uint32_t
    public static final int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;   // uint64_t
    public static final int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5; // uint32_t, default 256
    public static final int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6; // uint32_t, default 256
    public static final int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7; // uint32_t, default 256
    public static final int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8; // uint32_t, default 256

    private static final class cublasLtCreate {
        static final String PROTOTYPE = "cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtCreate", DESC);
    }

    /** {@code cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)} */
    public static int cublasLtCreate(MemorySegment lightHandle) {
        try {
            return (int) cublasLtCreate.HANDLE.handle().invokeExact(lightHandle);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtDestroy {
        static final String PROTOTYPE = "cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtDestroy", DESC);
    }

    /** {@code cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)} */
    public static int cublasLtDestroy(MemorySegment lightHandle) {
        try {
            return (int) cublasLtDestroy.HANDLE.handle().invokeExact(lightHandle);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtGetStatusName {
        static final String PROTOTYPE = "const char *cublasLtGetStatusName(cublasStatus_t status)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(C_POINTER, cublasStatus_t);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtGetStatusName", DESC);
    }

    /** {@code const char *cublasLtGetStatusName(cublasStatus_t status)} */
    public static MemorySegment cublasLtGetStatusName(int status) {
        try {
            return (MemorySegment) cublasLtGetStatusName.HANDLE.handle().invokeExact(status);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtGetStatusString {
        static final String PROTOTYPE = "const char *cublasLtGetStatusString(cublasStatus_t status)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(C_POINTER, cublasStatus_t);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtGetStatusString", DESC);
    }

    /** {@code const char *cublasLtGetStatusString(cublasStatus_t status)} */
    public static MemorySegment cublasLtGetStatusString(int status) {
        try {
            return (MemorySegment) cublasLtGetStatusString.HANDLE.handle().invokeExact(status);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtGetVersion {
        static final String PROTOTYPE = "size_t cublasLtGetVersion(void)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(size_t);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtGetVersion", DESC);
    }

    /** {@code size_t cublasLtGetVersion(void)} */
    public static long cublasLtGetVersion() {
        try {
            return (long) cublasLtGetVersion.HANDLE.handle().invokeExact();
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatrixLayoutCreate {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_LONG, C_LONG, C_LONG);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatrixLayoutCreate", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld)} */
    public static int cublasLtMatrixLayoutCreate(MemorySegment matLayout, int type, long rows, long cols, long ld) {
        try {
            return (int) cublasLtMatrixLayoutCreate.HANDLE.handle().invokeExact(matLayout, type, rows, cols, ld);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatrixLayoutDestroy {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatrixLayoutDestroy", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)} */
    public static int cublasLtMatrixLayoutDestroy(MemorySegment matLayout) {
        try {
            return (int) cublasLtMatrixLayoutDestroy.HANDLE.handle().invokeExact(matLayout);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatrixLayoutSetAttribute {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t sizeInBytes)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_POINTER, C_LONG);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatrixLayoutSetAttribute", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t sizeInBytes)} */
    public static int cublasLtMatrixLayoutSetAttribute(MemorySegment matLayout, int attr, MemorySegment buf, long sizeInBytes) {
        try {
            return (int) cublasLtMatrixLayoutSetAttribute.HANDLE.handle().invokeExact(matLayout, attr, buf, sizeInBytes);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulDescCreate {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_INT);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulDescCreate", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType)} */
    public static int cublasLtMatmulDescCreate(MemorySegment matmulDesc, int computeType, int scaleType) {
        try {
            return (int) cublasLtMatmulDescCreate.HANDLE.handle().invokeExact(matmulDesc, computeType, scaleType);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulDescDestroy {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulDescDestroy", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)} */
    public static int cublasLtMatmulDescDestroy(MemorySegment matmulDesc) {
        try {
            return (int) cublasLtMatmulDescDestroy.HANDLE.handle().invokeExact(matmulDesc);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulDescSetAttribute {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t sizeInBytes)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_POINTER, C_LONG);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulDescSetAttribute", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t sizeInBytes)} */
    public static int cublasLtMatmulDescSetAttribute(MemorySegment matmulDesc, int attr, MemorySegment buf, long sizeInBytes) {
        try {
            return (int) cublasLtMatmulDescSetAttribute.HANDLE.handle().invokeExact(matmulDesc, attr, buf, sizeInBytes);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulPreferenceCreate {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulPreferenceCreate", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)} */
    public static int cublasLtMatmulPreferenceCreate(MemorySegment pref) {
        try {
            return (int) cublasLtMatmulPreferenceCreate.HANDLE.handle().invokeExact(pref);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulPreferenceDestroy {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulPreferenceDestroy", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)} */
    public static int cublasLtMatmulPreferenceDestroy(MemorySegment pref) {
        try {
            return (int) cublasLtMatmulPreferenceDestroy.HANDLE.handle().invokeExact(pref);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulPreferenceSetAttribute {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t sizeInBytes)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_INT, C_POINTER, C_LONG);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulPreferenceSetAttribute", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t sizeInBytes)} */
    public static int cublasLtMatmulPreferenceSetAttribute(MemorySegment pref, int attr, MemorySegment buf, long sizeInBytes) {
        try {
            return (int) cublasLtMatmulPreferenceSetAttribute.HANDLE.handle().invokeExact(pref, attr, buf, sizeInBytes);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmulAlgoGetHeuristic {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference, int requestedAlgoCount, cublasLtMatmulHeuristicResult_t *heuristicResultsArray, int *returnAlgoCount)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmulAlgoGetHeuristic", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference, int requestedAlgoCount, cublasLtMatmulHeuristicResult_t *heuristicResultsArray, int *returnAlgoCount)} */
    public static int cublasLtMatmulAlgoGetHeuristic(MemorySegment lightHandle, MemorySegment operationDesc, MemorySegment Adesc, MemorySegment Bdesc, MemorySegment Cdesc, MemorySegment Ddesc, MemorySegment preference, int requestedAlgoCount, MemorySegment heuristicResultsArray, MemorySegment returnAlgoCount) {
        try {
            return (int) cublasLtMatmulAlgoGetHeuristic.HANDLE.handle().invokeExact(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount, heuristicResultsArray, returnAlgoCount);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cublasLtMatmul {
        static final String PROTOTYPE = "cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(cublasStatus_t, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_LONG, C_POINTER);
        static final Downcall HANDLE = Downcall.cublasLt("cublasLtMatmul", DESC);
    }

    /** {@code cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)} */
    public static int cublasLtMatmul(MemorySegment lightHandle, MemorySegment computeDesc, MemorySegment alpha, MemorySegment A, MemorySegment Adesc, MemorySegment B, MemorySegment Bdesc, MemorySegment beta, MemorySegment C, MemorySegment Cdesc, MemorySegment D, MemorySegment Ddesc, MemorySegment algo, MemorySegment workspace, long workspaceSizeInBytes, MemorySegment stream) {
        try {
            return (int) cublasLtMatmul.HANDLE.handle().invokeExact(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
