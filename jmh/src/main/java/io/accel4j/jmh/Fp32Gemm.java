package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import org.bytedeco.javacpp.FloatPointer;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * One fp32 product for {@link GemmBench} and {@link GemmNaiveBench}: seeded operands, an accel4j pool, and — only in
 * the forks that measure OpenBLAS, so the others never load it — OpenBLAS pointers on the same buffers.
 */
final class Fp32Gemm implements AutoCloseable {

    final GemmShape shape;
    final GemmBuffers buf;
    private final Parallel pool;
    private final FloatPointer pa;
    private final FloatPointer pb;
    private final FloatPointer pc;

    Fp32Gemm(String shape, int threads, BenchmarkParams params) {
        this.shape = GemmShape.parse(shape);
        this.buf = new GemmBuffers(this.shape, DType.FP32, DType.FP32, 42);
        this.pool = new Parallel(threads);
        if (params.getBenchmark().endsWith(".openblas")) {
            OpenBlas.setThreads(threads);
            pa = OpenBlas.floats(buf.a);
            pb = OpenBlas.floats(buf.b);
            pc = OpenBlas.floats(buf.c);
            System.out.print("[" + OpenBlas.describe() + "] "); // lands on JMH's first iteration line
        } else {
            pa = pb = pc = null;
        }
    }

    void accel4j() {
        buf.accel4j(pool, 1f, 1f);
    }

    void openblas() {
        OpenBlas.sgemm(shape, pa, pb, pc);
    }

    @Override
    public void close() {
        pool.close();
        buf.close();
    }
}
