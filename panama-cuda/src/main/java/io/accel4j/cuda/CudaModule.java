package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A module loaded with {@code cuModuleLoadDataEx} from a PTX image (the driver JIT-compiling it for the device) or a
 * cubin (ptxas's output for one architecture, loaded as it is); unloaded by {@link #close()}. A failed load throws a {@link CudaException} whose message ends with the JIT's error
 * log (the line and reason in the PTX); the info log of a successful load is kept in {@link #infoLog()}.
 */
public final class CudaModule extends NativeResource {

    /** Bytes of each JIT log buffer. */
    static final int LOG_BYTES = 16 * 1024;

    private final CudaContext context;
    private final MemorySegment module;
    private final String infoLog;

    private CudaModule(CudaContext context, MemorySegment module, String infoLog) {
        this.context = context;
        this.module = module;
        this.infoLog = infoLog;
    }

    static CudaModule loadPtx(CudaContext context, String ptx) {
        try (Arena arena = Arena.ofConfined()) {
            return load(context, arena.allocateFrom(ptx));
        }
    }

    /** A cubin (an ELF image): refused by a driver older than the ptxas that wrote it, or for another device. */
    static CudaModule loadCubin(CudaContext context, byte[] cubin) {
        if (cubin.length < 4 || cubin[0] != 0x7f || cubin[1] != 'E' || cubin[2] != 'L' || cubin[3] != 'F') {
            throw new IllegalArgumentException("not a cubin (no ELF header), " + cubin.length + " bytes");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment image = arena.allocate(cubin.length, 16);
            MemorySegment.copy(MemorySegment.ofArray(cubin), 0, image, 0, cubin.length);
            return load(context, image);
        }
    }

    private static CudaModule load(CudaContext context, MemorySegment image) {
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment info = arena.allocate(LOG_BYTES);
            MemorySegment error = arena.allocate(LOG_BYTES);
            int[] keys = {
                cuda_h.CU_JIT_INFO_LOG_BUFFER, cuda_h.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                cuda_h.CU_JIT_ERROR_LOG_BUFFER, cuda_h.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                cuda_h.CU_JIT_LOG_VERBOSE
            };
            MemorySegment options = arena.allocateFrom(ValueLayout.JAVA_INT, keys);
            // optionValues is void*[]: pointers for the buffers, the sizes and the flag cast to pointer-sized ints.
            MemorySegment values = arena.allocate(ValueLayout.ADDRESS, keys.length);
            values.setAtIndex(ValueLayout.ADDRESS, 0, info);
            values.setAtIndex(ValueLayout.JAVA_LONG, 1, LOG_BYTES);
            values.setAtIndex(ValueLayout.ADDRESS, 2, error);
            values.setAtIndex(ValueLayout.JAVA_LONG, 3, LOG_BYTES);
            values.setAtIndex(ValueLayout.JAVA_LONG, 4, 1);
            MemorySegment pmod = arena.allocate(ValueLayout.ADDRESS);
            int rc = cuda_h.cuModuleLoadDataEx(pmod, image, keys.length, options, values);
            if (rc != cuda_h.CUDA_SUCCESS) {
                throw CudaException.of("cuModuleLoadDataEx", rc, jitLog("JIT error log", error));
            }
            return new CudaModule(context, pmod.get(ValueLayout.ADDRESS, 0), info.getString(0).strip());
        }
    }

    private static String jitLog(String title, MemorySegment buffer) {
        String log = buffer.getString(0).strip();
        return log.isEmpty() ? title + ": (empty)" : title + ":\n" + log;
    }

    /** The JIT's info log of the load (registers, spills) — may be empty. */
    public String infoLog() {
        return infoLog;
    }

    /** The kernel named {@code name} (the PTX {@code .entry} name, e.g. an {@code extern "C"} function). */
    public CudaKernel function(String name) {
        ensureOpen();
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pf = arena.allocate(ValueLayout.ADDRESS);
            int rc = cuda_h.cuModuleGetFunction(pf, module, arena.allocateFrom(name));
            if (rc != cuda_h.CUDA_SUCCESS) {
                throw CudaException.of("cuModuleGetFunction", rc, "kernel name: " + name);
            }
            return new CudaKernel(this, context, name, pf.get(ValueLayout.ADDRESS, 0));
        }
    }

    @Override
    String describe() {
        return "CudaModule(" + module.address() + ")";
    }

    @Override
    void release() {
        context.makeCurrent();
        check("cuModuleUnload", cuda_h.cuModuleUnload(module));
    }
}
