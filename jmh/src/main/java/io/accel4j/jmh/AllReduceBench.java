package io.accel4j.jmh;

import io.accel4j.collectives.CollectiveException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
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
 * The in-process ring all-reduce ({@link InProcessGroup}, fp32 SUM) of {@code bytes} bytes over {@code ranks} ranks,
 * and the baseline {@code copy}: one {@code MemorySegment.copy} of the same bytes on one thread. The benchmark
 * thread is rank 0; ranks 1…N−1 are helper threads that run all-reduces back to back until tear-down kills the group.
 *
 * <p>Score: calls per second. As nccl-tests defines them, with S = {@code bytes} and t = 1/score:
 * algbw = S / t, and busbw = algbw · 2(N−1)/N (the bytes each rank must send in a ring, so that busbw is comparable
 * with a link's or memory's bandwidth whatever N). {@link #work} counts busbw for {@code allReduce} and S for
 * {@code copy}, so the report's GB/s are busbw and memcpy bandwidth (bytes copied per second) and their ratio is the
 * issue's acceptance figure (≥ 0.7 at 64 MB, 2 ranks). 256 MB: add {@code -p bytes=268435456}.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class AllReduceBench {

    @Param({"1024", "1048576", "67108864"})
    public long bytes;

    @Param({"2"})
    public int ranks;

    private Arena arena;
    private InProcessGroup group;
    private Communicator comm0;
    private MemorySegment buf, src, dst;
    private long count;
    private Thread[] helpers;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        count = bytes / Float.BYTES;
        group = InProcessGroup.create(ranks);
        comm0 = group.communicator(0);
        buf = filled(arena, count);
        src = filled(arena, count);
        dst = arena.allocate(bytes, 64);
        helpers = new Thread[ranks - 1];
        for (int r = 1; r < ranks; r++) {
            Communicator c = group.communicator(r);
            MemorySegment mine = filled(arena, count);
            helpers[r - 1] = Thread.ofPlatform().daemon().name("allreduce-rank-" + r).start(() -> {
                try {
                    while (true) {
                        c.allReduce(mine, count, DType.FP32, ReduceOp.SUM);
                    }
                } catch (CollectiveException stopped) {
                    // tear-down killed the group
                }
            });
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        group.kill(0);
        for (Thread t : helpers) {
            t.join(10_000);
        }
        group.close();
        arena.close();
    }

    static MemorySegment filled(Arena arena, long count) {
        MemorySegment s = arena.allocate(Math.max(1, count) * Float.BYTES, 64);
        for (long i = 0; i < count; i++) {
            // repeated in-place sums grow to +inf, which costs an fp32 add no more than any other value
            s.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, i, 1e-3f * (i % 1000));
        }
        return s;
    }

    /** busbw bytes for {@code allReduce}, bytes copied for {@code copy}; see the class comment. */
    public static Work work(String method, Map<String, String> params) {
        double s = Double.parseDouble(params.get("bytes"));
        double n = Double.parseDouble(params.getOrDefault("ranks", "2"));
        return switch (method) {
            case "allReduce" -> Work.bytes(s * 2 * (n - 1) / n, "copy");
            case "copy" -> Work.bytes(s, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void allReduce() {
        comm0.allReduce(buf, count, DType.FP32, ReduceOp.SUM);
    }

    /** The baseline: the same bytes copied once. */
    @Benchmark
    public void copy() {
        MemorySegment.copy(src, 0, dst, 0, bytes);
    }
}
