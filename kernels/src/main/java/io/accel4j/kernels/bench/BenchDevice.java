package io.accel4j.kernels.bench;

import io.accel4j.core.DType;
import io.accel4j.cuda.CublasHandle;
import io.accel4j.cuda.CublasLtHandle;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.kernels.AttentionBf16Gpu;
import io.accel4j.kernels.GpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * What the GPU benchmarks share: the context, {@link GpuOps}, a cuBLASLt handle and workspace for the GEMMs that
 * call cuBLASLt directly and a cuBLAS handle for the cuBLAS baseline (each null when its library is missing: those
 * cases then fail with the reason), and the seed of the random inputs. {@link #random} hands out device buffers of
 * fresh random values, generated on the host and copied once; {@link Buffers} frees a case's buffers together.
 */
final class BenchDevice implements AutoCloseable {

    /** cuBLASLt's recommended workspace on Hopper, as {@code CublasLtPlans}'. */
    static final long WORKSPACE_BYTES = 32L << 20;

    final CudaContext context;
    final GpuOps ops;
    /** The bf16 flash attention on {@link #ops}'s kernels. */
    final AttentionBf16Gpu attentionBf16;
    final CublasLtHandle lt;
    final DeviceBuffer workspace;
    /** Why {@link #lt} is null, else null. */
    final String ltMissing;
    /** cuBLAS ({@code cublasGemmEx}), the baseline of the cuBLASLt GEMMs; null when libcublas is missing. */
    final CublasHandle blas;
    /** Why {@link #blas} is null, else null. */
    final String blasMissing;
    private long seed;

    BenchDevice(CudaContext context, long seed) {
        this.context = context;
        this.seed = seed;
        this.ops = new GpuOps(context);
        this.attentionBf16 = new AttentionBf16Gpu(ops);
        CudaLibraries.Search search = CudaLibraries.cublasLt();
        if (search.found()) {
            CublasLtHandle h = null;
            try {
                h = CublasLtHandle.create(context);
                workspace = context.allocate(WORKSPACE_BYTES);
            } catch (RuntimeException e) {
                if (h != null) {
                    h.close();
                }
                attentionBf16.close();
                ops.close();
                throw e;
            }
            lt = h;
            ltMissing = null;
        } else {
            lt = null;
            workspace = null;
            ltMissing = search.notFoundMessage();
        }
        CudaLibraries.Search blasSearch = CudaLibraries.cublas();
        CublasHandle b = null;
        if (blasSearch.found()) {
            try {
                b = CublasHandle.create(context);
            } catch (RuntimeException e) {
                closeAll();
                throw e;
            }
        }
        blas = b;
        blasMissing = b == null ? blasSearch.notFoundMessage() : null;
    }

    /** The next seed of a case's inputs (each call a different one). */
    long nextSeed() {
        return seed++;
    }

    /** A device view of {@code b} (the form every {@link GpuOps} argument takes). */
    static MemorySegment view(DeviceBuffer b) {
        return GpuOps.device(b);
    }

    /** The device buffers of one case, freed together (last allocated first). */
    final class Buffers implements AutoCloseable {
        private final List<DeviceBuffer> owned = new ArrayList<>();

        /** An uninitialised buffer of {@code n} elements of {@code type}. */
        DeviceBuffer empty(DType type, long n) {
            DeviceBuffer b = context.allocate(Math.max(1, n * type.byteSize()));
            owned.add(b);
            return b;
        }

        /**
         * {@code n} values uniform in [lo, hi) as {@code type}: generated in fp32 on the host, copied, and cast on the
         * device by {@link GpuOps} when {@code type} is not FP32 (FP8 with scale 1).
         */
        DeviceBuffer random(DType type, long n, float lo, float hi) {
            DeviceBuffer f32 = context.allocate(4 * n);
            try {
                try (Arena arena = Arena.ofShared()) { // HostRandom fills it from several threads
                    MemorySegment host = arena.allocate(4 * n, 64);
                    HostRandom.fill(host, n, nextSeed(), lo, hi);
                    f32.copyFrom(host);
                }
                if (type == DType.FP32) {
                    owned.add(f32);
                    return f32;
                }
                DeviceBuffer out = empty(type, n);
                if (type.isFp8()) {
                    ops.castToFp8(view(out), type, view(f32), n, 1f);
                } else {
                    ops.castFromFp32(view(out), type, view(f32), n);
                }
                context.synchronize();
                f32.close();
                return out;
            } catch (RuntimeException e) {
                if (!owned.contains(f32)) {
                    f32.close();
                }
                throw e;
            }
        }

        @Override
        public void close() {
            RuntimeException first = null;
            for (int i = owned.size() - 1; i >= 0; i--) {
                try {
                    owned.get(i).close();
                } catch (RuntimeException e) {
                    first = first == null ? e : first;
                }
            }
            owned.clear();
            if (first != null) {
                throw first;
            }
        }
    }

    Buffers buffers() {
        return new Buffers();
    }

    @Override
    public void close() {
        if (blas != null) {
            blas.close();
        }
        closeAll();
    }

    /** Everything but {@link #blas}, last made first closed. */
    private void closeAll() {
        if (workspace != null) {
            workspace.close();
        }
        if (lt != null) {
            lt.close();
        }
        attentionBf16.close();
        ops.close();
    }
}
