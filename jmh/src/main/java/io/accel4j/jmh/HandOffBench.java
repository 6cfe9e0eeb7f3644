package io.accel4j.jmh;

import io.accel4j.cpu.Parallel;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * What a kernel call costs the thread pool before its first task starts and after its last one ends: {@code threads}
 * tasks that each add one to their own cache line, back to back, through {@link Parallel#forEach} (workers that spin
 * between calls) and through the baseline, an executor's queue and one future per helper, which is how
 * {@code Parallel} handed work out before. Score: microseconds a call. Run by hand (it has no bytes or flops for the
 * report): {@code java -jar jmh/target/benchmarks.jar HandOffBench}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Benchmark)
public class HandOffBench {

    @Param({"2"})
    public int threads;

    private Parallel pool;
    private ExecutorService executor;
    private long[] lines;

    @Setup(Level.Trial)
    public void setup() {
        pool = new Parallel(threads);
        executor = Executors.newFixedThreadPool(threads - 1);
        lines = new long[threads * 8]; // a 64-byte line a task
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        executor.shutdownNow();
    }

    @Benchmark
    public void pool() {
        pool.forEach(threads, i -> lines[i * 8]++);
    }

    /** The baseline: the caller and threads − 1 executor workers drain one counter; the caller waits on futures. */
    @Benchmark
    public void executor() throws InterruptedException, ExecutionException {
        AtomicInteger next = new AtomicInteger();
        int tasks = threads;
        Runnable drain = () -> {
            for (int i; (i = next.getAndIncrement()) < tasks; ) {
                lines[i * 8]++;
            }
        };
        Future<?>[] helpers = new Future<?>[threads - 1];
        for (int h = 0; h < helpers.length; h++) {
            helpers[h] = executor.submit(drain);
        }
        drain.run();
        for (Future<?> f : helpers) {
            f.get();
        }
    }
}
