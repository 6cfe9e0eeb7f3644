package io.accel4j.cuda.bindings;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;

/**
 * The CUDA driver API ({@code cuda.h}, CUDA 13) as jextract shapes it: a static method per function, named by the
 * real symbol the header maps the API name to ({@code cuMemAlloc} → {@code cuMemAlloc_v2}), each with a holder
 * class owning its {@link FunctionDescriptor}, its C prototype and a downcall handle created on the first call.
 * Split over {@code cuda_h_2} (layouts, constants, init/device/context/error), {@code cuda_h_1} (memory) and this
 * class (streams, events, modules, launch), like jextract's split of a large header; call everything as
 * {@code cuda_h.name(…)}.
 *
 * <p>Loading this class touches no native library. Without {@code libcuda.so.1} each call throws
 * {@link io.accel4j.cuda.CudaException} listing where the driver was searched. Only the functions the project uses
 * are bound; {@code CudaHeaderCheckTest} compiles every prototype, layout and constant against the real header.
 */
public final class cuda_h extends cuda_h_1 {

    private cuda_h() {}

    private static final class cuStreamCreate {
        static final String PROTOTYPE = "CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuStreamCreate", DESC);
    }

    /** {@code CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)} */
    public static int cuStreamCreate(MemorySegment phStream, int Flags) {
        try {
            return (int) cuStreamCreate.HANDLE.handle().invokeExact(phStream, Flags);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuStreamSynchronize {
        static final String PROTOTYPE = "CUresult cuStreamSynchronize(CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuStreamSynchronize", DESC);
    }

    /** {@code CUresult cuStreamSynchronize(CUstream hStream)} */
    public static int cuStreamSynchronize(MemorySegment hStream) {
        try {
            return (int) cuStreamSynchronize.HANDLE.handle().invokeExact(hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuStreamDestroy_v2 {
        static final String PROTOTYPE = "CUresult cuStreamDestroy_v2(CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuStreamDestroy_v2", DESC);
    }

    /** {@code CUresult cuStreamDestroy_v2(CUstream hStream)} */
    public static int cuStreamDestroy_v2(MemorySegment hStream) {
        try {
            return (int) cuStreamDestroy_v2.HANDLE.handle().invokeExact(hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuStreamWaitEvent {
        static final String PROTOTYPE = "CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuStreamWaitEvent", DESC);
    }

    /** {@code CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)} */
    public static int cuStreamWaitEvent(MemorySegment hStream, MemorySegment hEvent, int Flags) {
        try {
            return (int) cuStreamWaitEvent.HANDLE.handle().invokeExact(hStream, hEvent, Flags);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventCreate {
        static final String PROTOTYPE = "CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuEventCreate", DESC);
    }

    /** {@code CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)} */
    public static int cuEventCreate(MemorySegment phEvent, int Flags) {
        try {
            return (int) cuEventCreate.HANDLE.handle().invokeExact(phEvent, Flags);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventRecord {
        static final String PROTOTYPE = "CUresult cuEventRecord(CUevent hEvent, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventRecord", DESC);
    }

    /** {@code CUresult cuEventRecord(CUevent hEvent, CUstream hStream)} */
    public static int cuEventRecord(MemorySegment hEvent, MemorySegment hStream) {
        try {
            return (int) cuEventRecord.HANDLE.handle().invokeExact(hEvent, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventSynchronize {
        static final String PROTOTYPE = "CUresult cuEventSynchronize(CUevent hEvent)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventSynchronize", DESC);
    }

    /** {@code CUresult cuEventSynchronize(CUevent hEvent)} */
    public static int cuEventSynchronize(MemorySegment hEvent) {
        try {
            return (int) cuEventSynchronize.HANDLE.handle().invokeExact(hEvent);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventQuery {
        static final String PROTOTYPE = "CUresult cuEventQuery(CUevent hEvent)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventQuery", DESC);
    }

    /** {@code CUresult cuEventQuery(CUevent hEvent)} */
    public static int cuEventQuery(MemorySegment hEvent) {
        try {
            return (int) cuEventQuery.HANDLE.handle().invokeExact(hEvent);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventElapsedTime {
        static final String PROTOTYPE = "CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)";
        /** CUDA 12.8+ headers map the name to {@code _v2} by a macro; the unversioned symbol is in every driver. */
        static final String DECLARED_AS = "cuEventElapsedTime_v2";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventElapsedTime", DESC);
    }

    /**
     * {@code CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)}: the unversioned symbol
     * that every driver exports (the header declares the same prototype as {@code cuEventElapsedTime_v2}, 12.8+).
     */
    public static int cuEventElapsedTime(MemorySegment pMilliseconds, MemorySegment hStart, MemorySegment hEnd) {
        try {
            return (int) cuEventElapsedTime.HANDLE.handle().invokeExact(pMilliseconds, hStart, hEnd);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventElapsedTime_v2 {
        static final String PROTOTYPE = "CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventElapsedTime_v2", DESC);
    }

    /** {@code CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)} */
    public static int cuEventElapsedTime_v2(MemorySegment pMilliseconds, MemorySegment hStart, MemorySegment hEnd) {
        try {
            return (int) cuEventElapsedTime_v2.HANDLE.handle().invokeExact(pMilliseconds, hStart, hEnd);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuEventDestroy_v2 {
        static final String PROTOTYPE = "CUresult cuEventDestroy_v2(CUevent hEvent)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuEventDestroy_v2", DESC);
    }

    /** {@code CUresult cuEventDestroy_v2(CUevent hEvent)} */
    public static int cuEventDestroy_v2(MemorySegment hEvent) {
        try {
            return (int) cuEventDestroy_v2.HANDLE.handle().invokeExact(hEvent);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuModuleLoadDataEx {
        static final String PROTOTYPE = "CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options, void **optionValues)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuModuleLoadDataEx", DESC);
    }

    /** {@code CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options, void **optionValues)} */
    public static int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int numOptions, MemorySegment options, MemorySegment optionValues) {
        try {
            return (int) cuModuleLoadDataEx.HANDLE.handle().invokeExact(module, image, numOptions, options, optionValues);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuModuleGetFunction {
        static final String PROTOTYPE = "CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuModuleGetFunction", DESC);
    }

    /** {@code CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)} */
    public static int cuModuleGetFunction(MemorySegment hfunc, MemorySegment hmod, MemorySegment name) {
        try {
            return (int) cuModuleGetFunction.HANDLE.handle().invokeExact(hfunc, hmod, name);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuModuleUnload {
        static final String PROTOTYPE = "CUresult cuModuleUnload(CUmodule hmod)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuModuleUnload", DESC);
    }

    /** {@code CUresult cuModuleUnload(CUmodule hmod)} */
    public static int cuModuleUnload(MemorySegment hmod) {
        try {
            return (int) cuModuleUnload.HANDLE.handle().invokeExact(hmod);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuLaunchKernel {
        static final String PROTOTYPE = "CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_INT, C_INT, C_INT, C_INT, C_INT, C_INT, C_INT, C_POINTER, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuLaunchKernel", DESC);
    }

    /** {@code CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)} */
    public static int cuLaunchKernel(MemorySegment f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY, int blockDimZ, int sharedMemBytes, MemorySegment hStream, MemorySegment kernelParams, MemorySegment extra) {
        try {
            return (int) cuLaunchKernel.HANDLE.handle().invokeExact(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuOccupancyMaxActiveBlocksPerMultiprocessor {
        static final String PROTOTYPE = "CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER, C_INT, size_t);
        static final Downcall HANDLE = Downcall.driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", DESC);
    }

    /** {@code CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize)} */
    public static int cuOccupancyMaxActiveBlocksPerMultiprocessor(MemorySegment numBlocks, MemorySegment func, int blockSize, long dynamicSMemSize) {
        try {
            return (int) cuOccupancyMaxActiveBlocksPerMultiprocessor.HANDLE.handle().invokeExact(numBlocks, func, blockSize, dynamicSMemSize);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuFuncSetAttribute {
        static final String PROTOTYPE = "CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUfunction, CUfunction_attribute, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuFuncSetAttribute", DESC);
    }

    /** {@code CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)} */
    public static int cuFuncSetAttribute(MemorySegment hfunc, int attrib, int value) {
        try {
            return (int) cuFuncSetAttribute.HANDLE.handle().invokeExact(hfunc, attrib, value);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuTensorMapEncodeTiled {
        static final String PROTOTYPE = "CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const cuuint32_t *boxDim, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, CUtensorMapDataType, cuuint32_t, C_POINTER, C_POINTER, C_POINTER, C_POINTER, C_POINTER, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
        static final Downcall HANDLE = Downcall.driver("cuTensorMapEncodeTiled", DESC);
    }

    /** {@code CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const cuuint32_t *boxDim, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)} */
    public static int cuTensorMapEncodeTiled(MemorySegment tensorMap, int tensorDataType, int tensorRank, MemorySegment globalAddress, MemorySegment globalDim, MemorySegment globalStrides, MemorySegment boxDim, MemorySegment elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill) {
        try {
            return (int) cuTensorMapEncodeTiled.HANDLE.handle().invokeExact(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion, oobFill);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
