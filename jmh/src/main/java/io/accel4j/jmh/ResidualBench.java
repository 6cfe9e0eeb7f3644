package io.accel4j.jmh;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.Residual;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
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
 * The residual add over n floats ({@link Residual}): forward, backward, and the baseline {@code copy} of n floats
 * split over the same threads. GPT-2 small's residual stream is B·T·C floats: 786K at B·T = 1024, 3M at 4096.
 *
 * <p>Score: calls per second. GB/s = score · bytes / 10⁹, counting every fp32 value read or written once:
 * {@code forward} reads inp1 and inp2 and writes out, 12·n bytes; {@code backward} reads dout, dinp1 and dinp2
 * and writes dinp1 and dinp2, 20·n bytes; {@code copy} reads and writes n floats, 8·n bytes.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class ResidualBench {

    @Param({"786432", "3145728"})
    public int n;

    @Param({"1", "2"})
    public int threads;

    private Arena arena;
    private Parallel pool;
    private MemorySegment inp1, inp2, out, dout, dinp1, dinp2;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        SplittableRandom rng = new SplittableRandom(42);
        inp1 = GeluBench.random(arena, n, rng, 1);
        inp2 = GeluBench.random(arena, n, rng, 1);
        dout = GeluBench.random(arena, n, rng, 1);
        dinp1 = GeluBench.random(arena, n, rng, 1);
        dinp2 = GeluBench.random(arena, n, rng, 1);
        out = arena.allocate((long) n * Float.BYTES, 64);
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
            case "forward" -> Work.bytes(12 * n, "copy");
            case "backward" -> Work.bytes(20 * n, "copy");
            case "copy" -> Work.bytes(8 * n, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void forward() {
        Residual.forward(pool, out, inp1, inp2, n);
    }

    @Benchmark
    public void backward() {
        Residual.backward(pool, dinp1, dinp2, dout, n);
    }

    /** The baseline: n floats copied. */
    @Benchmark
    public void copy() {
        GeluBench.copy(pool, inp1, out, (long) n * Float.BYTES);
    }
}
