package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The GPU set-up of the {@link GpuOps} family tests ({@code @RegisterExtension static final GpuFixture F}): before
 * the class, skips with {@link Cuda#probe()}'s description where there is no usable GPU, else opens device 0, a
 * {@link GpuOps} and the reference {@link CpuOps} (one thread); after each test frees its device buffers and host
 * memory; after the class closes everything. Also the helpers the tests share: seeded random inputs, uploads and
 * downloads, and the comparisons, each failure naming the element and the seed.
 */
final class GpuFixture implements BeforeAllCallback, AfterAllCallback, AfterEachCallback {

    static final long SEED = 20261202L;

    CudaContext ctx;
    GpuOps gpu;
    CpuOps cpu;
    private Parallel pool;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private Arena arena = Arena.ofShared();

    @Override
    public void beforeAll(ExtensionContext context) {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @Override
    public void afterEach(ExtensionContext context) {
        buffers.forEach(DeviceBuffer::close);
        buffers.clear();
        arena.close();
        arena = Arena.ofShared();
    }

    @Override
    public void afterAll(ExtensionContext context) {
        if (gpu != null) {
            gpu.close();
        }
        if (ctx != null) {
            ctx.close();
        }
        if (pool != null) {
            pool.close();
        }
        arena.close();
    }

    /** A device buffer freed after the test. */
    DeviceBuffer allocate(long bytes) {
        DeviceBuffer b = ctx.allocate(bytes);
        buffers.add(b);
        return b;
    }

    /** The reference's thread pool (one thread). */
    Parallel pool() {
        return pool;
    }

    /** Host memory freed after the test. */
    Arena arena() {
        return arena;
    }

    MemorySegment floats(long n, double lo, double hi, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, (float) r.nextDouble(lo, hi));
        }
        return s;
    }

    MemorySegment ints(long n, int bound, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(JAVA_INT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_INT, i, r.nextInt(bound));
        }
        return s;
    }

    MemorySegment nans(long n) {
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, Float.NaN);
        }
        return s;
    }

    MemorySegment copy(MemorySegment host) {
        return arena.allocate(host.byteSize(), 16).copyFrom(host);
    }

    /** A device buffer holding a copy of {@code host}, as a device view for GpuOps. */
    MemorySegment up(MemorySegment host) {
        DeviceBuffer b = ctx.allocate(host.byteSize());
        buffers.add(b);
        b.copyFrom(host);
        return GpuOps.device(b);
    }

    /** The device buffer behind {@code view} copied back to a new host segment. */
    MemorySegment down(MemorySegment view) {
        DeviceBuffer b = buffers.stream().filter(x -> x.address() == view.address()).findFirst().orElseThrow();
        MemorySegment host = arena.allocate(b.byteSize(), 16);
        b.copyTo(host);
        return host;
    }

    static void assertClose(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n, double tol) {
        for (long i = 0; i < n; i++) {
            float g = gpuOut.getAtIndex(JAVA_FLOAT, i), c = cpuOut.getAtIndex(JAVA_FLOAT, i);
            if (!(Math.abs(g - c) <= tol * (1 + Math.abs(c)))) {
                throw new AssertionError(what + "[" + i + "]: gpu " + g + ", cpu " + c + " (tolerance " + tol
                        + "·(1+|cpu|), seed " + SEED + ")");
            }
        }
    }

    /** |gpu − cpu| ≤ tol·max|cpu| for every element (a tolerance relative to the tensor's largest magnitude). */
    static void assertCloseToLargest(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n, double tol) {
        double largest = 0;
        for (long i = 0; i < n; i++) {
            largest = Math.max(largest, Math.abs(cpuOut.getAtIndex(JAVA_FLOAT, i)));
        }
        for (long i = 0; i < n; i++) {
            float g = gpuOut.getAtIndex(JAVA_FLOAT, i), c = cpuOut.getAtIndex(JAVA_FLOAT, i);
            if (!(Math.abs(g - c) <= tol * largest)) {
                throw new AssertionError(what + "[" + i + "]: gpu " + g + ", cpu " + c + " (tolerance " + tol
                        + "·" + largest + ", the largest |cpu|; seed " + SEED + ")");
            }
        }
    }

    static void assertSameBits(String what, MemorySegment gpuOut, MemorySegment cpuOut, long bytes) {
        long at = gpuOut.asSlice(0, bytes).mismatch(cpuOut.asSlice(0, bytes));
        assertThat(at).as("%s: first differing byte (seed %d)", what, SEED).isEqualTo(-1);
    }
}
