package io.accel4j.cuda.bindings;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;

/** {@code cuda.h} (CUDA 13), part 2 of 3 (use {@link cuda_h}): device memory, pinned host memory, memset, copies. */
class cuda_h_1 extends cuda_h_2 {

    cuda_h_1() {}

    private static final class cuMemGetInfo_v2 {
        static final String PROTOTYPE = "CUresult cuMemGetInfo_v2(size_t *free, size_t *total)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemGetInfo_v2", DESC);
    }

    /** {@code CUresult cuMemGetInfo_v2(size_t *free, size_t *total)} */
    public static int cuMemGetInfo_v2(MemorySegment free, MemorySegment total) {
        try {
            return (int) cuMemGetInfo_v2.HANDLE.handle().invokeExact(free, total);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemAlloc_v2 {
        static final String PROTOTYPE = "CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemAlloc_v2", DESC);
    }

    /** {@code CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)} */
    public static int cuMemAlloc_v2(MemorySegment dptr, long bytesize) {
        try {
            return (int) cuMemAlloc_v2.HANDLE.handle().invokeExact(dptr, bytesize);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemFree_v2 {
        static final String PROTOTYPE = "CUresult cuMemFree_v2(CUdeviceptr dptr)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr);
        static final Downcall HANDLE = Downcall.driver("cuMemFree_v2", DESC);
    }

    /** {@code CUresult cuMemFree_v2(CUdeviceptr dptr)} */
    public static int cuMemFree_v2(long dptr) {
        try {
            return (int) cuMemFree_v2.HANDLE.handle().invokeExact(dptr);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemHostAlloc {
        static final String PROTOTYPE = "CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, size_t, C_INT);
        static final Downcall HANDLE = Downcall.driver("cuMemHostAlloc", DESC);
    }

    /** {@code CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)} */
    public static int cuMemHostAlloc(MemorySegment pp, long bytesize, int Flags) {
        try {
            return (int) cuMemHostAlloc.HANDLE.handle().invokeExact(pp, bytesize, Flags);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemFreeHost {
        static final String PROTOTYPE = "CUresult cuMemFreeHost(void *p)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemFreeHost", DESC);
    }

    /** {@code CUresult cuMemFreeHost(void *p)} */
    public static int cuMemFreeHost(MemorySegment p) {
        try {
            return (int) cuMemFreeHost.HANDLE.handle().invokeExact(p);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemsetD8_v2 {
        static final String PROTOTYPE = "CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_CHAR, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemsetD8_v2", DESC);
    }

    /** {@code CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)} */
    public static int cuMemsetD8_v2(long dstDevice, byte uc, long N) {
        try {
            return (int) cuMemsetD8_v2.HANDLE.handle().invokeExact(dstDevice, uc, N);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemsetD32_v2 {
        static final String PROTOTYPE = "CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_INT, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemsetD32_v2", DESC);
    }

    /** {@code CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)} */
    public static int cuMemsetD32_v2(long dstDevice, int ui, long N) {
        try {
            return (int) cuMemsetD32_v2.HANDLE.handle().invokeExact(dstDevice, ui, N);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemsetD8Async {
        static final String PROTOTYPE = "CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_CHAR, size_t, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemsetD8Async", DESC);
    }

    /** {@code CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)} */
    public static int cuMemsetD8Async(long dstDevice, byte uc, long N, MemorySegment hStream) {
        try {
            return (int) cuMemsetD8Async.HANDLE.handle().invokeExact(dstDevice, uc, N, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemsetD32Async {
        static final String PROTOTYPE = "CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_INT, size_t, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemsetD32Async", DESC);
    }

    /** {@code CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)} */
    public static int cuMemsetD32Async(long dstDevice, int ui, long N, MemorySegment hStream) {
        try {
            return (int) cuMemsetD32Async.HANDLE.handle().invokeExact(dstDevice, ui, N, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyHtoD_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_POINTER, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyHtoD_v2", DESC);
    }

    /** {@code CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)} */
    public static int cuMemcpyHtoD_v2(long dstDevice, MemorySegment srcHost, long ByteCount) {
        try {
            return (int) cuMemcpyHtoD_v2.HANDLE.handle().invokeExact(dstDevice, srcHost, ByteCount);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyDtoH_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, CUdeviceptr, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyDtoH_v2", DESC);
    }

    /** {@code CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)} */
    public static int cuMemcpyDtoH_v2(MemorySegment dstHost, long srcDevice, long ByteCount) {
        try {
            return (int) cuMemcpyDtoH_v2.HANDLE.handle().invokeExact(dstHost, srcDevice, ByteCount);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyDtoD_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, CUdeviceptr, size_t);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyDtoD_v2", DESC);
    }

    /** {@code CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)} */
    public static int cuMemcpyDtoD_v2(long dstDevice, long srcDevice, long ByteCount) {
        try {
            return (int) cuMemcpyDtoD_v2.HANDLE.handle().invokeExact(dstDevice, srcDevice, ByteCount);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyHtoDAsync_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, C_POINTER, size_t, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyHtoDAsync_v2", DESC);
    }

    /** {@code CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)} */
    public static int cuMemcpyHtoDAsync_v2(long dstDevice, MemorySegment srcHost, long ByteCount, MemorySegment hStream) {
        try {
            return (int) cuMemcpyHtoDAsync_v2.HANDLE.handle().invokeExact(dstDevice, srcHost, ByteCount, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyDtoHAsync_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, C_POINTER, CUdeviceptr, size_t, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyDtoHAsync_v2", DESC);
    }

    /** {@code CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)} */
    public static int cuMemcpyDtoHAsync_v2(MemorySegment dstHost, long srcDevice, long ByteCount, MemorySegment hStream) {
        try {
            return (int) cuMemcpyDtoHAsync_v2.HANDLE.handle().invokeExact(dstHost, srcDevice, ByteCount, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class cuMemcpyDtoDAsync_v2 {
        static final String PROTOTYPE = "CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(CUresult, CUdeviceptr, CUdeviceptr, size_t, C_POINTER);
        static final Downcall HANDLE = Downcall.driver("cuMemcpyDtoDAsync_v2", DESC);
    }

    /** {@code CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)} */
    public static int cuMemcpyDtoDAsync_v2(long dstDevice, long srcDevice, long ByteCount, MemorySegment hStream) {
        try {
            return (int) cuMemcpyDtoDAsync_v2.HANDLE.handle().invokeExact(dstDevice, srcDevice, ByteCount, hStream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
