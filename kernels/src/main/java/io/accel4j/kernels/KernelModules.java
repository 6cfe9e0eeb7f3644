package io.accel4j.kernels;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaModule;
import io.accel4j.cuda.bindings.cuda_h;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The PTX modules of one context, each loaded the first time one of its kernels is asked for (on compute capability
 * 9.0 ptxas's cubin first, which needs no JIT; the PTX, JIT-compiled by the driver, where there is none or the
 * driver refuses it), so that a module the driver cannot compile (the sm_90a wgmma attention on a driver whose JIT rejects it)
 * fails only the kernel family that lives in it, not every op. Every load is recorded ({@link #loads()}: the module,
 * the outcome, the JIT's time and log, whose verbose form lists each kernel's registers and spills); a failed load
 * is remembered and every later request for one of its kernels fails the same way at once, without a second JIT.
 * Closes the modules it loaded.
 */
public final class KernelModules implements AutoCloseable {

    /**
     * One module load: {@code image} what was loaded ({@code "cubin"}, {@code "ptx"}, or {@code "ptx (cubin: <why
     * not>)"} when the driver refused the cubin), {@code status} {@code "ok"} or the error's name
     * ({@code CUDA_ERROR_INVALID_PTX}, …), {@code rc} the {@code CUresult} (0 when loaded), {@code log} the JIT's info
     * log (ok) or the error message.
     */
    public record Load(String module, String arch, String image, String status, int rc, long jitMillis, String log) {
        public boolean ok() {
            return rc == 0;
        }
    }

    /**
     * What a driver answers to a cubin it cannot use (older than the ptxas that wrote it, or another device): then the
     * PTX is JIT-compiled instead.
     */
    static final Set<Integer> CUBIN_REFUSALS = Set.of(cuda_h.CUDA_ERROR_INVALID_IMAGE,
            cuda_h.CUDA_ERROR_NO_BINARY_FOR_GPU, cuda_h.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, cuda_h.CUDA_ERROR_INVALID_PTX);

    private final CudaContext context;
    private final String arch;
    private final Map<String, CudaModule> loaded = new LinkedHashMap<>();
    private final Map<String, CudaException> failed = new HashMap<>();
    private final Map<String, CudaKernel> kernels = new HashMap<>();
    private final List<Load> loads = new ArrayList<>();
    private boolean closed;

    /** Modules of {@code context} from the PTX set {@code arch} ({@link Kernels#ARCHS}); nothing loaded yet. */
    KernelModules(CudaContext context, String arch) {
        this.context = Objects.requireNonNull(context, "context");
        this.arch = Objects.requireNonNull(arch, "arch");
    }

    /**
     * The kernel of {@code s}, its module loaded first if it is not yet.
     *
     * @throws CudaException the module's load failure (the same one on every call), naming the module
     */
    synchronized CudaKernel kernel(KernelSignature s) {
        if (closed) {
            throw new IllegalStateException("the kernel modules are closed");
        }
        CudaKernel k = kernels.get(s.entry());
        if (k == null) {
            k = module(s.module()).function(s.entry());
            kernels.put(s.entry(), k);
        }
        return k;
    }

    private CudaModule module(String name) {
        CudaModule m = loaded.get(name);
        if (m != null) {
            return m;
        }
        CudaException earlier = failed.get(name);
        if (earlier != null) {
            throw earlier;
        }
        long t0 = System.nanoTime();
        String image = "ptx";
        Optional<byte[]> cubin = Kernels.cubin(name, arch);
        if (cubin.isPresent()) {
            try {
                m = context.loadCubin(cubin.get());
                image = "cubin";
            } catch (CudaException e) {
                if (!CUBIN_REFUSALS.contains(e.status())) {
                    throw recordFailure(name, "cubin", e, t0);
                }
                image = "ptx (cubin: " + e.errorName() + ")";
            }
        }
        if (m == null) {
            try {
                m = context.loadPtx(Kernels.ptx(name, arch));
            } catch (CudaException e) {
                throw recordFailure(name, image, e, t0);
            }
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        loads.add(new Load(name, arch, image, "ok", 0, ms, m.infoLog()));
        loaded.put(name, m);
        return m;
    }

    /** Records a failed load of {@code name} and returns the exception naming the module, to throw. */
    private CudaException recordFailure(String name, String image, CudaException e, long t0) {
        long ms = (System.nanoTime() - t0) / 1_000_000;
        CudaException named = new CudaException(e.call() + " (module " + name + ", " + arch + ")", e.status(),
                e.errorName(), messageOf(e));
        loads.add(new Load(name, arch, image, e.errorName(), e.status(), ms, e.getMessage()));
        failed.put(name, named);
        return named;
    }

    /** The driver's message of {@code e} (after {@code "call failed: NAME (rc): "}). */
    private static String messageOf(CudaException e) {
        String prefix = e.call() + " failed: " + e.errorName() + " (" + e.status() + "): ";
        String m = e.getMessage();
        return m.startsWith(prefix) ? m.substring(prefix.length()) : m;
    }

    /** Loads every module not yet tried (recording each outcome, failures included); for the GPU check. */
    synchronized List<Load> loadAll() {
        for (String name : Kernels.MODULES) {
            try {
                module(name);
            } catch (CudaException e) {
                // recorded in loads()
            }
        }
        return loads();
    }

    /** Every load so far, in order. */
    synchronized List<Load> loads() {
        return List.copyOf(loads);
    }

    /** The PTX set these modules come from. */
    String arch() {
        return arch;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException first = null;
        for (CudaModule m : loaded.values()) {
            try {
                m.close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        loaded.clear();
        kernels.clear();
        if (first != null) {
            throw first;
        }
    }
}
