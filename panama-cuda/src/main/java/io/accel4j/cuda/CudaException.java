package io.accel4j.cuda;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A failed CUDA call: the API call, the {@code CUresult} value, its enum name (from {@code cuGetErrorName}) and the
 * driver's message (from {@code cuGetErrorString}), plus any detail such as a JIT error log.
 *
 * <p>A library that could not be found is reported with {@link #NOT_FOUND} as the status and
 * {@code "LIBRARY_NOT_FOUND"} as the name.
 */
public class CudaException extends RuntimeException {

    /** The status of a {@link #libraryNotFound} exception (no {@code CUresult} is negative). */
    public static final int NOT_FOUND = -1;

    private static final long serialVersionUID = 1L;

    private final String call;
    private final int status;
    private final String errorName;

    public CudaException(String call, int status, String errorName, String message) {
        super(call + " failed: " + errorName + " (" + status + "): " + message);
        this.call = call;
        this.status = status;
        this.errorName = errorName;
    }

    private CudaException(String call, String message) {
        super(message);
        this.call = call;
        this.status = NOT_FOUND;
        this.errorName = "LIBRARY_NOT_FOUND";
    }

    /** {@code "<call>: libcuda.so.1 not found (searched: …)"}. */
    public static CudaException libraryNotFound(String call, CudaLibraries.Search search) {
        return new CudaException(call, call + ": " + search.notFoundMessage());
    }

    /** A symbol that the library found lacks (a library older than the header the bindings follow). */
    public static CudaException symbolNotFound(String symbol, CudaLibraries.Search search) {
        return new CudaException(symbol, symbol + ": symbol not found in " + search.loadedFrom()
                + " (older than the header these bindings follow; update " + search.library() + ")");
    }

    /** Throws a {@code CudaException} for {@code call} unless {@code status} is {@code CUDA_SUCCESS}. */
    public static void check(String call, int status) {
        if (status != cuda_h.CUDA_SUCCESS) {
            throw of(call, status, null);
        }
    }

    /** The exception for a failed {@code call}, with the driver's name and message, and {@code detail} if any. */
    public static CudaException of(String call, int status, String detail) {
        String name = describe(status, true);
        String message = describe(status, false);
        if (detail != null && !detail.isBlank()) {
            message = message + "\n" + detail.strip();
        }
        return new CudaException(call, status, name, message);
    }

    /** cuGetErrorName / cuGetErrorString, or a placeholder if the driver does not know the value. */
    @SuppressWarnings("restricted") // reinterpret: the driver returns a NUL-terminated static string
    private static String describe(int status, boolean name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
            int rc = name ? cuda_h.cuGetErrorName(status, p) : cuda_h.cuGetErrorString(status, p);
            MemorySegment s = p.get(ValueLayout.ADDRESS, 0);
            if (rc != cuda_h.CUDA_SUCCESS || s.equals(MemorySegment.NULL)) {
                return name ? "CUresult " + status : "unknown error";
            }
            return s.reinterpret(4096).getString(0);
        } catch (RuntimeException e) {
            return name ? "CUresult " + status : "unknown error (" + e.getMessage() + ")";
        }
    }

    /** The API call that failed, e.g. {@code "cuMemAlloc_v2"}. */
    public String call() {
        return call;
    }

    /** The {@code CUresult} value, or {@link #NOT_FOUND}. */
    public int status() {
        return status;
    }

    /** The enum name, e.g. {@code "CUDA_ERROR_OUT_OF_MEMORY"}. */
    public String errorName() {
        return errorName;
    }
}
