package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.ref.GemmRef;
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
 * fp32 GEMM at small sizes, single-threaded: the naive triple loop ({@link GemmRef#gemm}) beside accel4j and
 * OpenBLAS (the baseline) in one run. A separate class from {@link GemmBench} because the naive loop (about a
 * GFLOP/s) would take minutes per iteration at the large shapes; JMH has no way to skip one method for some
 * parameter values. Score: products per second.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class GemmNaiveBench {

    @Param({"256", "512"})
    public String shape;

    private Fp32Gemm gemm;

    @Setup(Level.Trial)
    public void setup(BenchmarkParams params) {
        gemm = new Fp32Gemm(shape, 1, params);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        gemm.close();
    }

    @Benchmark
    public void naive() {
        GemmShape s = gemm.shape;
        GemmBuffers buf = gemm.buf;
        GemmRef.gemm(s.layout(), s.M(), s.N(), s.K(),
                1f, buf.a, DType.FP32, s.lda(), 1f, buf.b, DType.FP32, s.ldb(), 1f,
                0f, buf.c, DType.FP32, s.ldc(), null);
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
