package io.accel4j.cuda;

import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A cuBLASLt handle ({@code cublasLtCreate}) bound to a context, destroyed by {@link #close()}. The matmuls it runs
 * are {@link CublasLtMatmul} plans. Without {@code libcublasLt} {@link #create} throws a {@link CudaException} with
 * {@code LIBRARY_NOT_FOUND} and the places searched ({@link CudaLibraries#cublasLt()}).
 */
public final class CublasLtHandle extends NativeResource {

    private final CudaContext context;
    private final MemorySegment handle;

    private CublasLtHandle(CudaContext context, MemorySegment handle) {
        this.context = context;
        this.handle = handle;
    }

    /** A handle for {@code context}. */
    public static CublasLtHandle create(CudaContext context) {
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
            check("cublasLtCreate", cublasLt_h.cublasLtCreate(p));
            return new CublasLtHandle(context, p.get(ValueLayout.ADDRESS, 0));
        }
    }

    /** The library's version ({@code cublasLtGetVersion}), e.g. 120605 for 12.6.5; 130000 and up for CUDA 13. */
    public long version() {
        ensureOpen();
        return cublasLt_h.cublasLtGetVersion();
    }

    CudaContext context() {
        return context;
    }

    /** The native handle, checked open. */
    MemorySegment handle() {
        ensureOpen();
        return handle;
    }

    /** Throws a {@link CudaException} with cuBLASLt's status name and message unless {@code status} is success. */
    static void check(String call, int status) {
        if (status != cublas_api_h.CUBLAS_STATUS_SUCCESS) {
            throw failed(call, status, null);
        }
    }

    /** The exception for {@code call} having returned {@code status}, with {@code detail} (the operands) if any. */
    static CudaException failed(String call, int status, String detail) {
        String message = describe(status, false);
        if (detail != null) {
            message = message + " (" + detail + ")";
        }
        return new CudaException(call, status, describe(status, true), message);
    }

    @SuppressWarnings("restricted") // reinterpret: cuBLASLt returns a NUL-terminated static string
    private static String describe(int status, boolean name) {
        try {
            MemorySegment s = name ? cublasLt_h.cublasLtGetStatusName(status) : cublasLt_h.cublasLtGetStatusString(status);
            return s.equals(MemorySegment.NULL) ? "cublasStatus " + status : s.reinterpret(4096).getString(0);
        } catch (RuntimeException e) {
            return "cublasStatus " + status;
        }
    }

    @Override
    String describe() {
        return "CublasLtHandle(" + handle.address() + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cublasLtDestroy", cublasLt_h.cublasLtDestroy(handle));
    }
}
