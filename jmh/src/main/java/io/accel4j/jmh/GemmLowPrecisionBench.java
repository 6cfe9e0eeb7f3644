package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
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
 * Low-precision GEMM with fp32 accumulation and an fp32 C: BF16×BF16, FP8 E4M3×E4M3 and E4M3×E5M2 (per-tensor
 * scales ≠ 1, as a scaled fp8 tensor has), beside accel4j's own fp32 GEMM (the baseline of this class) at the
 * same shape and thread count. The target: BF16 at ≥ 0.7× fp32 (narrow loads are cheap, the widening is not).
 * Score: products per second; GFLOP/s counts 2·M·N·K whatever the element type.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class GemmLowPrecisionBench {

    /** Per-tensor scales of the fp8 operands: not 1 and not powers of two, so no shortcut applies. */
    static final float SCALE_A = 0.8125f;
    static final float SCALE_B = 1.4375f;

    @Param({"1024", "gpt2-fwd"})
    public String shape;

    @Param({"1", "2"})
    public int threads;

    private GemmShape s;
    private GemmBuffers buf;
    private Parallel pool;

    @Setup(Level.Trial)
    public void setup(BenchmarkParams params) {
        s = GemmShape.parse(shape);
        String method = params.getBenchmark().substring(params.getBenchmark().lastIndexOf('.') + 1);
        buf = switch (method) {
            case "fp32" -> new GemmBuffers(s, DType.FP32, DType.FP32, 42);
            case "bf16" -> new GemmBuffers(s, DType.BF16, DType.BF16, 42);
            case "e4m3" -> new GemmBuffers(s, DType.FP8_E4M3, DType.FP8_E4M3, 42);
            case "e4m3xe5m2" -> new GemmBuffers(s, DType.FP8_E4M3, DType.FP8_E5M2, 42);
            default -> throw new IllegalStateException("no operands for benchmark method " + method);
        };
        pool = new Parallel(threads);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        buf.close();
    }

    private void run(float scaleA, float scaleB) {
        buf.accel4j(pool, scaleA, scaleB);
    }

    /** The baseline: accel4j fp32. */
    @Benchmark
    public void fp32() {
        run(1f, 1f);
    }

    @Benchmark
    public void bf16() {
        run(1f, 1f);
    }

    @Benchmark
    public void e4m3() {
        run(SCALE_A, SCALE_B);
    }

    @Benchmark
    public void e4m3xe5m2() {
        run(SCALE_A, SCALE_B);
    }
}
