package io.accel4j.cuda.bindings;

import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaLibraries;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * One bound function's downcall handle, created on the first call: the library is searched and the symbol looked
 * up then, never when a binding class loads. Without the library every call throws a {@link CudaException} saying
 * where it looked; the search is retried by nobody (it is cached by {@link CudaLibraries}).
 *
 * <p>The binding classes keep, per function, a holder with its symbol, its C prototype (as the header declares it,
 * checked by a gcc-compiled test) and its {@link FunctionDescriptor}; this class only links them.
 */
public final class Downcall {

    private final String symbol;
    private final FunctionDescriptor descriptor;
    private final Supplier<CudaLibraries.Search> library;
    private volatile MethodHandle handle;

    private Downcall(String symbol, FunctionDescriptor descriptor, Supplier<CudaLibraries.Search> library) {
        this.symbol = symbol;
        this.descriptor = descriptor;
        this.library = library;
    }

    /** A function of the CUDA driver ({@code libcuda.so.1}). */
    static Downcall driver(String symbol, FunctionDescriptor descriptor) {
        return new Downcall(symbol, descriptor, CudaLibraries::driver);
    }

    /** A function of cuBLAS ({@code libcublas.so.13} or {@code .12}). */
    static Downcall cublas(String symbol, FunctionDescriptor descriptor) {
        return new Downcall(symbol, descriptor, CudaLibraries::cublas);
    }

    /** A function of cuBLASLt ({@code libcublasLt.so.13} or {@code .12}). */
    static Downcall cublasLt(String symbol, FunctionDescriptor descriptor) {
        return new Downcall(symbol, descriptor, CudaLibraries::cublasLt);
    }

    /** A function of NCCL ({@code libnccl.so.2}). */
    static Downcall nccl(String symbol, FunctionDescriptor descriptor) {
        return new Downcall(symbol, descriptor, CudaLibraries::nccl);
    }

    /** The handle, linked on first use. */
    MethodHandle handle() {
        MethodHandle h = handle;
        if (h == null) {
            h = link();
            handle = h;
        }
        return h;
    }

    @SuppressWarnings("restricted") // the binding classes' descriptors are checked against the headers
    private MethodHandle link() {
        CudaLibraries.Search search = library.get();
        if (!search.found()) {
            throw CudaException.libraryNotFound(symbol, search);
        }
        Optional<MemorySegment> address = search.lookup().find(symbol);
        if (address.isEmpty()) {
            throw CudaException.symbolNotFound(symbol, search);
        }
        return Linker.nativeLinker().downcallHandle(address.get(), descriptor);
    }

    /** Rethrows what {@code invokeExact} threw: unchecked as is, anything else wrapped (it cannot happen). */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("unexpected checked exception from a downcall", t);
    }

    @Override
    public String toString() {
        return symbol + descriptor;
    }
}
