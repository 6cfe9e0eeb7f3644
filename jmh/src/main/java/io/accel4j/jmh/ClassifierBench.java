package io.accel4j.jmh;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.FusedClassifier;
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

/**
 * The fused softmax cross-entropy ({@link FusedClassifier}) at GPT-2's vocabulary, {@code N} rows of
 * {@code V = 50257} logits padded to {@code Vp = 50304}, against a copy of the logits buffer (the baseline), on 1
 * and 2 threads.
 *
 * <p>Score: operations per second. The logits buffer is {@code N·Vp·4} bytes (N = 256: 51,511,296 B).
 * {@code forwardBackward} reads it and writes it back in place (dlogits), {@code copy} reads it and writes another
 * buffer of that size: both move {@code 2·N·Vp·4} bytes, GB/s = score × 2·N·Vp·4 / 10⁹, and their ratio is the ratio
 * of scores. {@code forward} only reads: {@code N·Vp·4} bytes. (Each invocation of {@code forwardBackward} runs on the
 * previous one's gradients; the work per element, one exponential, is the same.)
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class ClassifierBench {

    static final int V = 50257, VP = 50304;

    @Param({"256"})
    public int N;

    @Param({"1", "2"})
    public int threads;

    private Arena arena;
    private Parallel pool;
    private MemorySegment logits, losses, targets, copy;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        logits = arena.allocate((long) N * VP * 4, 64);
        copy = arena.allocate((long) N * VP * 4, 64);
        losses = arena.allocate(N * 4L, 64);
        targets = arena.allocate(N * 4L, 64);
        for (long i = 0; i < (long) N * VP; i++) { // logits in [−4, 4), from a cheap hash of the index
            long h = (i + 1) * 0x9E37_79B9_7F4A_7C15L;
            logits.setAtIndex(ValueLayout.JAVA_FLOAT, i, (h >>> 40) * 0x1p-21f - 4f);
        }
        for (int i = 0; i < N; i++) {
            targets.setAtIndex(ValueLayout.JAVA_INT, i, (int) ((i * 7919L) % V));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** Bytes read + written per operation, as counted above; compared with {@code copy}. */
    public static Work work(String method, Map<String, String> params) {
        double logitsBytes = Double.parseDouble(params.get("N")) * VP * 4;
        return switch (method) {
            case "forwardBackward" -> Work.bytes(2 * logitsBytes, "copy");
            case "forward" -> Work.bytes(logitsBytes, "copy");
            case "copy" -> Work.bytes(2 * logitsBytes, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public double forwardBackward() {
        return FusedClassifier.forwardBackward(pool, logits, losses, targets, N, V, VP, 1f / N);
    }

    @Benchmark
    public double forward() {
        return FusedClassifier.forward(pool, losses, logits, targets, N, V, VP);
    }

    /** The baseline: copies the logits buffer, a row per task over the pool. */
    @Benchmark
    public void copy() {
        long rowBytes = VP * 4L;
        pool.forEach(N, i -> MemorySegment.copy(logits, i * rowBytes, copy, i * rowBytes, rowBytes));
    }
}
