package io.accel4j.jmh;

import io.accel4j.cpu.Parallel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * What the element-wise optimizer benchmarks ({@link AdamWBench}, {@link SgdBench}, {@link LionBench}) share: the
 * {@code params} and {@code threads} parameters, a pool and an arena per trial, inputs from a cheap hash, and the
 * baseline {@link #copy}, a plain bulk copy of {@link #copyBytesPerParam} bytes a parameter (half of what the
 * update reads and writes) in the same 64Ki-element tasks over the pool. A subclass allocates its update's buffers in
 * {@link #allocate} (not for {@code copy}, which gets only its source and destination).
 */
@State(Scope.Benchmark)
public abstract class UpdateBench {

    /** Elements per task, as the kernels split their ranges. */
    static final int CHUNK = 1 << 16;

    @Param({"16777216"})
    public long params;

    @Param({"1", "2"})
    public int threads;

    Arena arena;
    Parallel pool;
    private MemorySegment src, dst;

    /** Bytes {@link #copy} copies per parameter: half of the update's bytes read + written. */
    abstract long copyBytesPerParam();

    /** Allocates what benchmark method {@code method} updates, from {@link #floats} and {@link #zeros}. */
    abstract void allocate(String method);

    @Setup(Level.Trial)
    public void setup(BenchmarkParams bp) {
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        String method = bp.getBenchmark().substring(bp.getBenchmark().lastIndexOf('.') + 1);
        if (method.equals("copy")) {
            src = arena.allocate(params * copyBytesPerParam(), 64).fill((byte) 1);
            dst = arena.allocate(params * copyBytesPerParam(), 64).fill((byte) 2);
        } else {
            allocate(method);
        }
    }

    /** {@code params} fp32 values in [−0.5, 0.5), from a cheap hash of the index. */
    MemorySegment floats(long salt) {
        MemorySegment s = arena.allocate(params * 4, 64);
        for (long i = 0; i < params; i++) {
            long h = (i + salt) * 0x9E37_79B9_7F4A_7C15L;
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (h >>> 40) * 0x1p-24f - 0.5f);
        }
        return s;
    }

    /** {@code bytesPerParam · params} zero bytes. */
    MemorySegment zeros(long bytesPerParam) {
        return arena.allocate(params * bytesPerParam, 64).fill((byte) 0);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** The baseline: copies {@code params · copyBytesPerParam()} bytes in 64Ki-parameter tasks over the pool. */
    @Benchmark
    public void copy() {
        long chunkBytes = CHUNK * copyBytesPerParam(), total = params * copyBytesPerParam();
        int tasks = (int) ((total + chunkBytes - 1) / chunkBytes);
        pool.forEach(tasks, t -> {
            long from = t * chunkBytes;
            MemorySegment.copy(src, from, dst, from, Math.min(chunkBytes, total - from));
        });
    }
}
