package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.LayerNorm;
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
 * LayerNorm over N rows of C floats ({@link LayerNorm}): the forward, the forward plus backward, and the baseline
 * {@code copy}, a {@link MemorySegment#copy} of as many bytes as the forward moves, split over the same threads.
 *
 * <p>Score: calls per second. GB/s = score · bytes / 10⁹, counting every fp32 value read or written once:
 * <ul>
 * <li>{@code forward}: reads inp (N·C), weight and bias (2C); writes out (N·C), mean and rstd (2N):
 *     bytes = 4·(2·N·C + 2C + 2N);
 * <li>{@code forwardBackward}: the forward, then the backward reads dout, inp, dinp (3·N·C), weight, dweight, dbias
 *     (3C), mean, rstd (2N) and writes dinp (N·C), dweight, dbias (2C): bytes = 4·(6·N·C + 7C + 4N) (the backward's
 *     per-chunk scratch stays in cache and is not counted);
 * <li>{@code copy}: reads and writes N·C + C + N floats: bytes = 4·(2·N·C + 2C + 2N), the forward's count.
 * </ul>
 * The backward adds into its gradients on every call; they drift but stay far from overflow.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class LayerNormBench {

    /** N×C: GPT-2 small's C = 768 at B·T = 1024 and 4096 rows. */
    @Param({"1024x768", "4096x768"})
    public String shape;

    @Param({"1", "2"})
    public int threads;

    private int n;
    private int c;
    private Arena arena;
    private Parallel pool;
    private MemorySegment inp, out, mean, rstd, weight, bias, dout, dinp, dweight, dbias, src, dst;

    @Setup(Level.Trial)
    public void setup() {
        String[] nc = shape.split("x");
        n = Integer.parseInt(nc[0]);
        c = Integer.parseInt(nc[1]);
        long rows = (long) n * c;
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        SplittableRandom rng = new SplittableRandom(42);
        inp = random(rows, rng);
        weight = random(c, rng);
        bias = random(c, rng);
        dout = random(rows, rng);
        dinp = random(rows, rng);
        dweight = random(c, rng);
        dbias = random(c, rng);
        out = floats(rows);
        mean = floats(n);
        rstd = floats(n);
        src = random(rows + c + n, rng);
        dst = floats(rows + c + n);
    }

    private MemorySegment floats(long count) {
        return arena.allocate(count * Float.BYTES, 64);
    }

    private MemorySegment random(long count, SplittableRandom rng) {
        MemorySegment s = floats(count);
        GemmBuffers.fillRandom(s, DType.FP32, count, rng);
        return s;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** Bytes read + written per operation, as counted above; compared with {@code copy}. */
    public static Work work(String method, Map<String, String> params) {
        String[] nc = params.get("shape").split("x");
        double n = Double.parseDouble(nc[0]), c = Double.parseDouble(nc[1]);
        return switch (method) {
            case "forward" -> Work.bytes(4 * (2 * n * c + 2 * c + 2 * n), "copy");
            case "forwardBackward" -> Work.bytes(4 * (6 * n * c + 7 * c + 4 * n), "copy");
            case "copy" -> Work.bytes(4 * (2 * n * c + 2 * c + 2 * n), null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void forward() {
        LayerNorm.forward(pool, out, mean, rstd, inp, weight, bias, n, c);
    }

    @Benchmark
    public void forwardBackward() {
        LayerNorm.forward(pool, out, mean, rstd, inp, weight, bias, n, c);
        LayerNorm.backward(pool, dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c);
    }

    /** The baseline: copies the forward's byte count, one contiguous slice per thread. */
    @Benchmark
    public void copy() {
        GeluBench.copy(pool, src, dst, src.byteSize());
    }
}
