package io.accel4j.jmh;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.AdamW;
import io.accel4j.cpu.ops.Reductions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * Fused AdamW over {@code params} parameters ({@link AdamW#update}, {@link AdamW#updateBf16}) against a plain bulk
 * copy that moves as many bytes as the fp32 update (the baseline), plus the gradient-norm and amax reductions over the
 * gradient buffer, on 1 and 2 threads. Every method splits its work into the same 64Ki-element tasks over the pool.
 *
 * <p>Score: operations per second. Bytes moved per operation, counting every byte read and every byte written once:
 * <ul>
 *   <li>{@code adamw}: 28 per parameter (reads p, g, m, v; writes p, m, v; fp32) — 16Mi params: 469,762,048 B;</li>
 *   <li>{@code adamwBf16}: 30 per parameter (reads master, g, m, v; writes master, m, v, and the bf16 copy);</li>
 *   <li>{@code copy}: copies 14 bytes per parameter, so reads 14 and writes 14: 28 per parameter, as {@code adamw};
 *   </li>
 *   <li>{@code sumOfSquares}, {@code amax}: read 4 per parameter.</li>
 * </ul>
 * GB/s = score × bytes per operation / 10⁹; {@code adamw}'s fraction of the copy's bandwidth is simply the ratio of
 * the two scores. (Write-allocate traffic, reading a destination line before writing it, is not counted. The copy
 * pays it on every destination line; the update writes back lines it has just read, so it does not, and can pass
 * 1.0× the copy.)
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class AdamWBench {

    /** Bytes the baseline copies per parameter: half of fp32 AdamW's 28 bytes read + written. */
    static final long COPY_BYTES_PER_PARAM = 14;
    static final int CHUNK = 1 << 16;

    @Param({"16777216"})
    public long params;

    @Param({"1", "2"})
    public int threads;

    private Arena arena;
    private Parallel pool;
    private MemorySegment p, g, m, v, bf16, src, dst;
    private final AdamWConfig config = new AdamWConfig(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
    private long seed;

    @Setup(Level.Trial)
    public void setup(BenchmarkParams bp) {
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        String method = bp.getBenchmark().substring(bp.getBenchmark().lastIndexOf('.') + 1);
        if (method.equals("copy")) {
            src = arena.allocate(params * COPY_BYTES_PER_PARAM, 64);
            dst = arena.allocate(params * COPY_BYTES_PER_PARAM, 64);
            src.fill((byte) 1);
            dst.fill((byte) 2);
            return;
        }
        g = floats(0x5EED);
        if (method.startsWith("adamw")) {
            p = floats(42);
            m = arena.allocate(params * 4, 64).fill((byte) 0);
            v = arena.allocate(params * 4, 64).fill((byte) 0);
            bf16 = arena.allocate(params * 2, 64).fill((byte) 0);
        }
    }

    /** params fp32 values in [−0.5, 0.5), from a cheap hash of the index. */
    private MemorySegment floats(long salt) {
        MemorySegment s = arena.allocate(params * 4, 64);
        for (long i = 0; i < params; i++) {
            long h = (i + salt) * 0x9E37_79B9_7F4A_7C15L;
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (h >>> 40) * 0x1p-24f - 0.5f);
        }
        return s;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** Bytes read + written per operation, as counted above; every method is compared with {@code copy}. */
    public static Work work(String method, Map<String, String> params) {
        long n = Long.parseLong(params.get("params"));
        return switch (method) {
            case "adamw" -> Work.bytes(28.0 * n, "copy");
            case "adamwBf16" -> Work.bytes(30.0 * n, "copy");
            case "copy" -> Work.bytes(2.0 * COPY_BYTES_PER_PARAM * n, null);
            case "sumOfSquares", "amax" -> Work.bytes(4.0 * n, "copy");
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void adamw() {
        AdamW.update(pool, p, g, m, v, 0, params, config, 10, 1f);
    }

    @Benchmark
    public void adamwBf16() {
        AdamW.updateBf16(pool, bf16, p, g, m, v, 0, params, config, 10, 1f, seed++);
    }

    /** The baseline: copies params·14 bytes in 64Ki·14-byte tasks over the pool. */
    @Benchmark
    public void copy() {
        long chunkBytes = CHUNK * COPY_BYTES_PER_PARAM, total = params * COPY_BYTES_PER_PARAM;
        int tasks = (int) ((total + chunkBytes - 1) / chunkBytes);
        pool.forEach(tasks, t -> {
            long from = t * chunkBytes;
            MemorySegment.copy(src, from, dst, from, Math.min(chunkBytes, total - from));
        });
    }

    @Benchmark
    public double sumOfSquares() {
        return Reductions.sumOfSquares(pool, g, params);
    }

    @Benchmark
    public float amax() {
        return Reductions.amax(pool, g, params);
    }
}
