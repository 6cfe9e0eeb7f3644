package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A kernel of a {@link CudaModule}; valid while its module is open (it owns nothing itself).
 *
 * <p>{@link #launch} packs the arguments the way {@code cuLaunchKernel} wants them: an array of pointers, one per
 * parameter, each to a copy of the value. Java {@code int}, {@code long}, {@code float} and {@code double} map to
 * the C types of the same size, a {@link DeviceBuffer} to its device pointer, a {@link TensorMap} to its 128 bytes
 * by value (a {@code const __grid_constant__ CUtensorMap} parameter); the kernel's parameter list must match in order
 * and size (the driver cannot check it).
 */
public final class CudaKernel {

    /** A launch dimension. */
    public record Dim(int x, int y, int z) {
        public Dim {
            if (x < 1 || y < 1 || z < 1) {
                throw new IllegalArgumentException("dimensions must be >= 1, got (" + x + ", " + y + ", " + z + ")");
            }
        }

        public static Dim of(int x) {
            return new Dim(x, 1, 1);
        }

        public static Dim of(int x, int y) {
            return new Dim(x, y, 1);
        }
    }

    private final CudaModule module;
    private final CudaContext context;
    private final String name;
    private final MemorySegment function;
    /** The dynamic shared memory this kernel's launches may take (the attribute last set; 0 until set). */
    private int sharedOptIn;

    CudaKernel(CudaModule module, CudaContext context, String name, MemorySegment function) {
        this.module = module;
        this.context = context;
        this.name = name;
        this.function = function;
    }

    public String name() {
        return name;
    }

    /**
     * Queues the kernel on {@code stream} ({@code null}: the default stream) with {@code sharedBytes} of dynamic
     * shared memory. Returns once queued; errors inside the kernel surface at the next synchronisation.
     *
     * <p>Any dynamic shared memory is opted in first ({@link #setMaxDynamicSharedBytes}, once per larger size): without
     * the attribute a launch may take only 48 KiB less the kernel's static shared memory, so one at exactly 48 KiB
     * (the fp32 and wmma attention at head size 128) would have no headroom.
     */
    public void launch(Dim grid, Dim block, int sharedBytes, Stream stream, Object... args) {
        if (sharedBytes < 0) {
            throw new IllegalArgumentException("sharedBytes must be >= 0, got " + sharedBytes);
        }
        module.ensureOpen();
        if (sharedBytes > optedIn()) {
            setMaxDynamicSharedBytes(sharedBytes);
        }
        MemorySegment streamHandle = Stream.handle(stream);
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment params = pack(arena, args);
            check("cuLaunchKernel(" + name + ")", cuda_h.cuLaunchKernel(function,
                    grid.x(), grid.y(), grid.z(), block.x(), block.y(), block.z(),
                    sharedBytes, streamHandle, params, MemorySegment.NULL));
        }
    }

    /** The kernel parameter array: {@code void*[]} pointing at a copy of each argument. */
    static MemorySegment pack(Arena arena, Object... args) {
        MemorySegment params = arena.allocate(ValueLayout.ADDRESS, Math.max(1, args.length));
        for (int i = 0; i < args.length; i++) {
            MemorySegment value = switch (args[i]) {
                case Integer v -> arena.allocateFrom(ValueLayout.JAVA_INT, v);
                case Long v -> arena.allocateFrom(ValueLayout.JAVA_LONG, v);
                case Float v -> arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
                case Double v -> arena.allocateFrom(ValueLayout.JAVA_DOUBLE, v);
                case DeviceBuffer b -> arena.allocateFrom(ValueLayout.JAVA_LONG, b.address());
                case TensorMap m -> arena.allocate(cuda_h.CUtensorMap).copyFrom(m.bytes());
                case null -> throw new IllegalArgumentException("kernel argument " + i + " is null");
                default -> throw new IllegalArgumentException("kernel argument " + i + " has unsupported type "
                        + args[i].getClass().getName() + " (int, long, float, double, DeviceBuffer or TensorMap)");
            };
            params.setAtIndex(ValueLayout.ADDRESS, i, value);
        }
        return params;
    }

    /**
     * Lets launches of this kernel take up to {@code bytes} of dynamic shared memory
     * ({@code CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES}): a launch above 48 KiB fails without it. The device's
     * limit is {@code CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN} (227 KiB on Hopper); above it the driver
     * refuses, and this throws.
     */
    public void setMaxDynamicSharedBytes(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
        }
        module.ensureOpen();
        context.makeCurrent();
        check("cuFuncSetAttribute(" + name + ", MAX_DYNAMIC_SHARED_SIZE_BYTES, " + bytes + ")",
                cuda_h.cuFuncSetAttribute(function, cuda_h.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
        synchronized (this) {
            sharedOptIn = bytes;
        }
    }

    private synchronized int optedIn() {
        return sharedOptIn;
    }

    /** How many blocks of {@code blockSize} threads fit on one multiprocessor at once. */
    public int maxActiveBlocksPerMultiprocessor(int blockSize, long sharedBytes) {
        module.ensureOpen();
        context.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment n = arena.allocate(ValueLayout.JAVA_INT);
            check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                    cuda_h.cuOccupancyMaxActiveBlocksPerMultiprocessor(n, function, blockSize, sharedBytes));
            return n.get(ValueLayout.JAVA_INT, 0);
        }
    }

    @Override
    public String toString() {
        return "CudaKernel(" + name + ")";
    }
}
