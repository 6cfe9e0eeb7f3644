package io.accel4j.kernels;

import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.Stream;
import io.accel4j.cuda.TensorMap;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A kernel's parameter list as data: the PTX module it lives in, its {@code .entry} name and the kind of each
 * parameter in order. {@link #launch} checks the Java arguments against it before handing them to the driver (which
 * cannot check anything), and {@code KernelPtxTest} checks it against the {@code .param} list of the entry in the
 * committed PTX, so a launcher and its kernel cannot drift apart silently.
 *
 * @param module the PTX resource's base name ({@code gelu} for {@code ptx/gelu.ptx})
 * @param entry  the {@code extern "C"} kernel name
 * @param params the parameters in order
 */
public record KernelSignature(String module, String entry, List<Param> params) {

    /** A parameter kind: its PTX type, its size in bytes and the Java argument that {@link #launch} accepts. */
    public enum Param {
        /** A device pointer ({@code T*}): a {@link MemorySegment} whose address is a device address. */
        PTR(".u64", 8),
        /** {@code long long} / {@code unsigned long long}: a Java {@code long}. */
        I64(".u64", 8),
        /** {@code int}: a Java {@code int}. */
        I32(".u32", 4),
        /** {@code float}: a Java {@code float}. */
        F32(".f32", 4),
        /** {@code const __grid_constant__ CUtensorMap} (128 bytes by value, {@code .align 128}): a {@link TensorMap}. */
        TENSOR_MAP(".b8[128]", 128);

        private final String ptxType;
        private final int bytes;

        Param(String ptxType, int bytes) {
            this.ptxType = ptxType;
            this.bytes = bytes;
        }

        /** The type nvcc writes in the entry's {@code .param} list. */
        public String ptxType() {
            return ptxType;
        }

        public int bytes() {
            return bytes;
        }
    }

    public KernelSignature {
        params = List.copyOf(params);
    }

    public static KernelSignature of(String module, String entry, Param... params) {
        return new KernelSignature(module, entry, List.of(params));
    }

    /**
     * The arguments as {@link CudaKernel#launch} wants them: each checked against its kind (a {@link MemorySegment}
     * for {@link Param#PTR}, becoming its address; {@link Long} for {@link Param#I64}; {@link Integer} for
     * {@link Param#I32}; {@link Float} for {@link Param#F32}; {@link TensorMap} for {@link Param#TENSOR_MAP}).
     *
     * @throws IllegalArgumentException on a wrong count or kind, naming the kernel and the parameter index
     */
    public Object[] pack(Object... args) {
        if (args.length != params.size()) {
            throw new IllegalArgumentException(entry + " takes " + params.size() + " parameters, got " + args.length);
        }
        Object[] out = new Object[args.length];
        for (int i = 0; i < args.length; i++) {
            Param p = params.get(i);
            Object a = args[i];
            out[i] = switch (p) {
                case PTR -> a instanceof MemorySegment s ? (Object) s.address() : null;
                case I64 -> a instanceof Long ? a : null;
                case I32 -> a instanceof Integer ? a : null;
                case F32 -> a instanceof Float ? a : null;
                case TENSOR_MAP -> a instanceof TensorMap ? a : null;
            };
            if (out[i] == null) {
                throw new IllegalArgumentException(entry + " parameter " + i + " is " + p + ", got "
                        + (a == null ? "null" : a.getClass().getSimpleName()));
            }
        }
        return out;
    }

    /** Checks and packs {@code args} (see {@link #pack}), then queues {@code kernel} with them. */
    public void launch(CudaKernel kernel, CudaKernel.Dim grid, CudaKernel.Dim block, int sharedBytes, Stream stream,
                       Object... args) {
        if (!kernel.name().equals(entry)) {
            throw new IllegalArgumentException("signature of " + entry + " used for kernel " + kernel.name());
        }
        kernel.launch(grid, block, sharedBytes, stream, pack(args));
    }
}
