package io.accel4j.jmh;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.ops.AdamW;
import io.accel4j.cpu.ops.Reductions;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

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
public class AdamWBench extends UpdateBench {

    /** Bytes the baseline copies per parameter: half of fp32 AdamW's 28 bytes read + written. */
    static final long COPY_BYTES_PER_PARAM = 14;

    private MemorySegment p, g, m, v, bf16;
    private final AdamWConfig config = new AdamWConfig(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
    private long seed;

    @Override
    long copyBytesPerParam() {
        return COPY_BYTES_PER_PARAM;
    }

    @Override
    void allocate(String method) {
        g = floats(0x5EED);
        if (method.startsWith("adamw")) {
            p = floats(42);
            m = zeros(4);
            v = zeros(4);
            bf16 = zeros(2);
        }
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

    @Benchmark
    public double sumOfSquares() {
        return Reductions.sumOfSquares(pool, g, params);
    }

    @Benchmark
    public float amax() {
        return Reductions.amax(pool, g, params);
    }
}
