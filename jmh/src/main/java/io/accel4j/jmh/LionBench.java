package io.accel4j.jmh;

import io.accel4j.core.ops.LionConfig;
import io.accel4j.cpu.ops.Lion;
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
 * Fused Lion over {@code params} parameters ({@link Lion#update}) against a plain bulk copy that moves as many bytes
 * (the baseline), on 1 and 2 threads. Every method splits its work into the same 64Ki-element tasks over the pool.
 *
 * <p>Score: operations per second. Bytes moved per operation, counting every byte read and every byte written once:
 * {@code lion} 20 per parameter (read p, g, m; write p, m; fp32); {@code copy} copies 10 bytes per parameter, so
 * reads 10 and writes 10: 20, as the update. GB/s = score × bytes / 10⁹, and the update's fraction of the copy's
 * bandwidth is the ratio of the scores (write-allocate traffic not counted: see {@link AdamWBench}).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
public class LionBench extends UpdateBench {

    /** Bytes the baseline copies per parameter: half of the update's 20 bytes read + written. */
    static final long COPY_BYTES_PER_PARAM = 10;

    private MemorySegment p, g, m;
    private final LionConfig config = new LionConfig(1e-4f, 0.9f, 0.99f, 1f);

    @Override
    long copyBytesPerParam() {
        return COPY_BYTES_PER_PARAM;
    }

    @Override
    void allocate(String method) {
        p = floats(42);
        g = floats(0x5EED);
        m = zeros(4);
    }

    /** Bytes read + written per operation, as counted above; every method is compared with {@code copy}. */
    public static Work work(String method, Map<String, String> params) {
        long n = Long.parseLong(params.get("params"));
        return switch (method) {
            case "lion" -> Work.bytes(20.0 * n, "copy");
            case "copy" -> Work.bytes(2.0 * COPY_BYTES_PER_PARAM * n, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void lion() {
        Lion.update(pool, p, g, m, 0, params, config, 1f);
    }
}
