package io.accel4j.cuda.bindings;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * {@code cuda.h} (CUDA 13), part 3 of 3 (jextract splits a large header the same way; use {@link cuda_h}): the C
 * layouts, the typedefs, the enum and {@code #define} constants the project uses, and the init, version, error,
 * device and context functions.
 *
 * <p>Every layout, constant and prototype here is checked against the real header by {@code CudaHeaderCheckTest}.
 */
class cuda_h_2 {

    cuda_h_2() {}

    public static final ValueLayout.OfByte C_CHAR = ValueLayout.JAVA_BYTE;
    public static final ValueLayout.OfInt C_INT = ValueLayout.JAVA_INT;
    public static final ValueLayout.OfLong C_LONG = ValueLayout.JAVA_LONG;
    public static final ValueLayout.OfLong C_LONG_LONG = ValueLayout.JAVA_LONG;
    public static final ValueLayout.OfFloat C_FLOAT = ValueLayout.JAVA_FLOAT;
    public static final AddressLayout C_POINTER = ValueLayout.ADDRESS;

    // typedefs (name = the C type; checked with sizeof)
    public static final ValueLayout.OfInt CUresult = C_INT;
    public static final ValueLayout.OfInt CUdevice = C_INT;
    public static final ValueLayout.OfLong CUdeviceptr = C_LONG_LONG;
    public static final ValueLayout.OfLong size_t = C_LONG;
    public static final ValueLayout.OfInt CUjit_option = C_INT;
    public static final ValueLayout.OfInt CUdevice_attribute = C_INT;
    public static final ValueLayout.OfInt CUfunction_attribute = C_INT;
    public static final AddressLayout CUcontext = C_POINTER;
    public static final AddressLayout CUstream = C_POINTER;
    public static final AddressLayout CUevent = C_POINTER;
    public static final AddressLayout CUmodule = C_POINTER;
    public static final AddressLayout CUfunction = C_POINTER;
    public static final ValueLayout.OfInt cuuint32_t = C_INT;
    public static final ValueLayout.OfInt CUtensorMapDataType = C_INT;
    public static final ValueLayout.OfInt CUtensorMapInterleave = C_INT;
    public static final ValueLayout.OfInt CUtensorMapSwizzle = C_INT;
    public static final ValueLayout.OfInt CUtensorMapL2promotion = C_INT;
    public static final ValueLayout.OfInt CUtensorMapFloatOOBfill = C_INT;

    /**
     * {@code typedef struct CUtensorMap_st { alignas(128) cuuint64_t opaque[16]; } CUtensorMap;} (CUDA 13: 128-byte
     * aligned; 12.x said 64): a TMA descriptor, encoded by the driver, passed to kernels by value.
     */
    public static final StructLayout CUtensorMap = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(16, C_LONG_LONG).withName("opaque")).withByteAlignment(128)
            .withName("CUtensorMap");

    // enum cudaError_enum (CUresult)
    public static final int CUDA_SUCCESS = 0;
    public static final int CUDA_ERROR_INVALID_VALUE = 1;
    public static final int CUDA_ERROR_OUT_OF_MEMORY = 2;
    public static final int CUDA_ERROR_NOT_INITIALIZED = 3;
    public static final int CUDA_ERROR_DEINITIALIZED = 4;
    public static final int CUDA_ERROR_STUB_LIBRARY = 34;
    public static final int CUDA_ERROR_NO_DEVICE = 100;
    public static final int CUDA_ERROR_INVALID_DEVICE = 101;
    public static final int CUDA_ERROR_INVALID_PTX = 218;
    public static final int CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
    public static final int CUDA_ERROR_INVALID_IMAGE = 200;
    public static final int CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
    public static final int CUDA_ERROR_NOT_FOUND = 500;
    public static final int CUDA_ERROR_INVALID_HANDLE = 400;
    public static final int CUDA_ERROR_LAUNCH_FAILED = 719;
    public static final int CUDA_ERROR_NOT_READY = 600;
    public static final int CUDA_ERROR_ILLEGAL_ADDRESS = 700;
    public static final int CUDA_ERROR_OPERATING_SYSTEM = 304;

    // enum CUdevice_attribute_enum
    public static final int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
    public static final int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
    public static final int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
    public static final int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
    public static final int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
    public static final int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
    public static final int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

    // enum CUfunction_attribute_enum
    public static final int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

    // enum CUtensorMapDataType_enum, CUtensorMapInterleave_enum, CUtensorMapSwizzle_enum, CUtensorMapL2promotion_enum,
    // CUtensorMapFloatOOBfill_enum (the values the project uses)
    public static final int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
    public static final int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
    public static final int CU_TENSOR_MAP_SWIZZLE_NONE = 0;
    public static final int CU_TENSOR_MAP_SWIZZLE_128B = 3;
    public static final int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
    public static final int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

    // enum CUjit_option_enum
    public static final int CU_JIT_INFO_LOG_BUFFER = 3;
    public static final int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
    public static final int CU_JIT_ERROR_LOG_BUFFER = 5;
    public static final int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
    public static final int CU_JIT_LOG_VERBOSE = 12;

    // enum CUevent_flags_enum, CUstream_flags_enum, #define CU_MEMHOSTALLOC_*
    public static final int CU_EVENT_DEFAULT = 0;
    public static final int CU_EVENT_BLOCKING_SYNC = 1;
    public static final int CU_EVENT_DISABLE_TIMING = 2;
    public static final int CU_STREAM_DEFAULT = 0;
    public static final int CU_STREAM_NON_BLOCKING = 1;
    public static final int CU_MEMHOSTALLOC_PORTABLE = 1;
    public static final int CU_MEMHOSTALLOC_DEVICEMAP = 2;
    public static final int CU_MEMHOSTALLOC_WRITECOMBINED = 4;

    private static final class cuInit {
        static final String PROTOTYPE = "CUresult cuInit(unsigned int Flags)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuInit", DESC);
    }

    /** {@code CUresult cuInit(unsigned int Flags)} */
    public static int cuInit(int Flags) {
        try {
            return (int) cuInit.HANDLE.handle().invokeExact(Flags);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDriverGetVersion {
        static final String PROTOTYPE = "CUresult cuDriverGetVersion(int *driverVersion)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuDriverGetVersion", DESC);
    }

    /** {@code CUresult cuDriverGetVersion(int *driverVersion)} */
    public static int cuDriverGetVersion(MemorySegment driverVersion) {
        try {
            return (int) cuDriverGetVersion.HANDLE.handle().invokeExact(driverVersion);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuGetErrorName {
        static final String PROTOTYPE = "CUresult cuGetErrorName(CUresult error, const char **pStr)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuGetErrorName", DESC);
    }

    /** {@code CUresult cuGetErrorName(CUresult error, const char **pStr)} */
    public static int cuGetErrorName(int error, MemorySegment pStr) {
        try {
            return (int) cuGetErrorName.HANDLE.handle().invokeExact(error, pStr);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuGetErrorString {
        static final String PROTOTYPE = "CUresult cuGetErrorString(CUresult error, const char **pStr)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuGetErrorString", DESC);
    }

    /** {@code CUresult cuGetErrorString(CUresult error, const char **pStr)} */
    public static int cuGetErrorString(int error, MemorySegment pStr) {
        try {
            return (int) cuGetErrorString.HANDLE.handle().invokeExact(error, pStr);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDeviceGetCount {
        static final String PROTOTYPE = "CUresult cuDeviceGetCount(int *count)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuDeviceGetCount", DESC);
    }

    /** {@code CUresult cuDeviceGetCount(int *count)} */
    public static int cuDeviceGetCount(MemorySegment count) {
        try {
            return (int) cuDeviceGetCount.HANDLE.handle().invokeExact(count);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDeviceGet {
        static final String PROTOTYPE = "CUresult cuDeviceGet(CUdevice *device, int ordinal)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuDeviceGet", DESC);
    }

    /** {@code CUresult cuDeviceGet(CUdevice *device, int ordinal)} */
    public static int cuDeviceGet(MemorySegment device, int ordinal) {
        try {
            return (int) cuDeviceGet.HANDLE.handle().invokeExact(device, ordinal);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDeviceGetName {
        static final String PROTOTYPE = "CUresult cuDeviceGetName(char *name, int len, CUdevice dev)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT, CUdevice);
        static final Downcall HANDLE = Downcall.driver("cuDeviceGetName", DESC);
    }

    /** {@code CUresult cuDeviceGetName(char *name, int len, CUdevice dev)} */
    public static int cuDeviceGetName(MemorySegment name, int len, int dev) {
        try {
            return (int) cuDeviceGetName.HANDLE.handle().invokeExact(name, len, dev);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDeviceGetAttribute {
        static final String PROTOTYPE = "CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT, CUdevice);
        static final Downcall HANDLE = Downcall.driver("cuDeviceGetAttribute", DESC);
    }

    /** {@code CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)} */
    public static int cuDeviceGetAttribute(MemorySegment pi, int attrib, int dev) {
        try {
            return (int) cuDeviceGetAttribute.HANDLE.handle().invokeExact(pi, attrib, dev);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDeviceTotalMem_v2 {
        static final String PROTOTYPE = "CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, CUdevice);
        static final Downcall HANDLE = Downcall.driver("cuDeviceTotalMem_v2", DESC);
    }

    /** {@code CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)} */
    public static int cuDeviceTotalMem_v2(MemorySegment bytes, int dev) {
        try {
            return (int) cuDeviceTotalMem_v2.HANDLE.handle().invokeExact(bytes, dev);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDevicePrimaryCtxRetain {
        static final String PROTOTYPE = "CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, CUdevice);
        static final Downcall HANDLE = Downcall.driver("cuDevicePrimaryCtxRetain", DESC);
    }

    /** {@code CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)} */
    public static int cuDevicePrimaryCtxRetain(MemorySegment pctx, int dev) {
        try {
            return (int) cuDevicePrimaryCtxRetain.HANDLE.handle().invokeExact(pctx, dev);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuDevicePrimaryCtxRelease_v2 {
        static final String PROTOTYPE = "CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdevice);
        static final Downcall HANDLE = Downcall.driver("cuDevicePrimaryCtxRelease_v2", DESC);
    }

    /** {@code CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)} */
    public static int cuDevicePrimaryCtxRelease_v2(int dev) {
        try {
            return (int) cuDevicePrimaryCtxRelease_v2.HANDLE.handle().invokeExact(dev);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuCtxSetCurrent {
        static final String PROTOTYPE = "CUresult cuCtxSetCurrent(CUcontext ctx)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuCtxSetCurrent", DESC);
    }

    /** {@code CUresult cuCtxSetCurrent(CUcontext ctx)} */
    public static int cuCtxSetCurrent(MemorySegment ctx) {
        try {
            return (int) cuCtxSetCurrent.HANDLE.handle().invokeExact(ctx);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuCtxGetCurrent {
        static final String PROTOTYPE = "CUresult cuCtxGetCurrent(CUcontext *pctx)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuCtxGetCurrent", DESC);
    }

    /** {@code CUresult cuCtxGetCurrent(CUcontext *pctx)} */
    public static int cuCtxGetCurrent(MemorySegment pctx) {
        try {
            return (int) cuCtxGetCurrent.HANDLE.handle().invokeExact(pctx);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuCtxSynchronize {
        static final String PROTOTYPE = "CUresult cuCtxSynchronize(void)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult);
        static final Downcall HANDLE = Downcall.driver("cuCtxSynchronize", DESC);
    }

    /** {@code CUresult cuCtxSynchronize(void)} */
    public static int cuCtxSynchronize() {
        try {
            return (int) cuCtxSynchronize.HANDLE.handle().invokeExact();
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
