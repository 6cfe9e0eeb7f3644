package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.Gelu;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
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

/**
 * GELU over n floats ({@link Gelu}): forward, backward, and the baseline {@code copy} of n floats split over the
 * same threads. GPT-2 small's MLP activation is B·T·4C floats: 4M at B·T = 1024, 16M at 4096.
 *
 * <p>Score: calls per second. GB/s = score · bytes / 10⁹, counting every fp32 value read or written once:
 * {@code forward} reads inp and writes out, 8·n bytes; {@code backward} reads inp, dout and dinp (it adds into
 * dinp) and writes dinp, 16·n bytes; {@code copy} reads and writes n floats, 8·n bytes.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class GeluBench {

    @Param({"4194304", "16777216"})
    public int n;

    @Param({"1", "2"})
    public int threads;

    private Arena arena;
    private Parallel pool;
    private MemorySegment inp, out, dout, dinp;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        SplittableRandom rng = new SplittableRandom(42);
        inp = random(arena, n, rng, 4); // the bend and both tails of GELU
        dout = random(arena, n, rng, 1);
        dinp = random(arena, n, rng, 1);
        out = arena.allocate((long) n * Float.BYTES, 64);
    }

    /** n floats uniform in [−scale, scale). */
    static MemorySegment random(Arena arena, long n, SplittableRandom rng, float scale) {
        MemorySegment s = arena.allocate(n * Float.BYTES, 64);
        GemmBuffers.fillRandom(s, DType.FP32, n, rng);
        for (long i = 0; i < n && scale != 1f; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, scale * s.getAtIndex(ValueLayout.JAVA_FLOAT, i));
        }
        return s;
    }

    /** Copies the first {@code bytes} of src to dst, one contiguous 64-byte-aligned slice per pool thread. */
    static void copy(Parallel pool, MemorySegment src, MemorySegment dst, long bytes) {
        int parts = pool.threads();
        long slice = (bytes / parts + 63) & ~63L;
        pool.forEach(parts, k -> {
            long from = Math.min(bytes, k * slice);
            MemorySegment.copy(src, from, dst, from, Math.min(bytes, from + slice) - from);
        });
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** Bytes read + written per operation, as counted above; compared with {@code copy}. */
    public static Work work(String method, Map<String, String> params) {
        double n = Double.parseDouble(params.get("n"));
        return switch (method) {
            case "forward", "copy" -> Work.bytes(8 * n, method.equals("copy") ? null : "copy");
            case "backward" -> Work.bytes(16 * n, "copy");
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void forward() {
        Gelu.forward(pool, out, inp, n);
    }

    @Benchmark
    public void backward() {
        Gelu.backward(pool, dinp, inp, dout, n);
    }

    /** The baseline: n floats copied, as many bytes as the forward moves. */
    @Benchmark
    public void copy() {
        copy(pool, inp, out, (long) n * Float.BYTES);
    }
}
