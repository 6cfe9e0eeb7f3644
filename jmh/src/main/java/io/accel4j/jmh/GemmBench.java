package io.accel4j.jmh;

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
 * fp32 GEMM, {@code C = op(A)·op(B)}: accel4j's {@link Gemm#gemm} against OpenBLAS's {@code cblas_sgemm} (the
 * baseline) on the same off-heap buffers, square sizes (NN), the three GPT-2 small MLP products and the three
 * LM-head products of the training step ({@link GemmShape}), on 1 and 2 threads. The naive triple loop only makes sense at small sizes: it lives in {@link GemmNaiveBench}.
 *
 * <p>Score: products per second; GFLOP/s = score · 2·M·N·K / 10⁹ ({@link Report} prints it). Warm-up is long on
 * purpose: a Vector API kernel measured before C2 has compiled it runs an order of magnitude slower.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class GemmBench {

    @Param({"256", "512", "1024", "2048", "gpt2-fwd", "gpt2-dinp", "gpt2-dw", "lm-fwd", "lm-dinp", "lm-dw"})
    public String shape;

    @Param({"1", "2"})
    public int threads;

    private Fp32Gemm gemm;

    @Setup(Level.Trial)
    public void setup(BenchmarkParams params) {
        gemm = new Fp32Gemm(shape, threads, params);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        gemm.close();
    }

    @Benchmark
    public void accel4j() {
        gemm.accel4j();
    }

    @Benchmark
    public void openblas() {
        gemm.openblas();
    }
}
