package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.util.List;
import java.util.Locale;
import org.bytedeco.javacpp.FloatPointer;

/**
 * accel4j's fp32 GEMM and OpenBLAS's {@code cblas_sgemm} taking turns in one JVM, for tuning decisions on a noisy
 * machine: JMH measures the two in separate forks minutes apart, while here each round runs accel4j for
 * {@code seconds}, then OpenBLAS for as long, on the same buffers ({@link GemmBuffers}) and thread count, and reports
 * both rates and their ratio; the median ratio over the rounds is the figure to compare.
 *
 * <pre>
 *   java --add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED -cp jmh/target/benchmarks.jar \
 *       io.accel4j.jmh.GemmInterleaved [shape=1024] [threads=1] [rounds=10] [seconds=1] [warmup=3]
 * </pre>
 * {@code shape} is a {@link GemmShape} name ({@code 1024}, {@code gpt2-fwd}, {@code 768x768x3072:NT}, …). The first
 * {@code warmup} seconds of each implementation are not counted (a Vector API kernel measured before C2 compiled it
 * runs an order of magnitude slower).
 *
 * <p>Besides the wall-clock rate, each turn reports the rate per CPU second of the process (all its threads): on a
 * shared machine a thread that another process preempts loses wall time but not CPU time, so on one thread the CPU
 * rate and its ratio hardly move with the load (on two, OpenBLAS's waiting threads spin, so read the wall ratio).
 * Unset {@code OPENBLAS_CORETYPE} for this run, as {@code jmh/run.sh} does: it forces OpenBLAS's slower Haswell
 * kernels on this CPU.
 */
public final class GemmInterleaved {

    private static final List<String> OPTIONS = List.of("shape", "threads", "rounds", "seconds", "warmup");
    private static final String USAGE = "usage: GemmInterleaved [shape=1024] [threads=1] [rounds=10] [seconds=1]"
            + " [warmup=3]";

    private GemmInterleaved() {}

    public static void main(String[] args) {
        Turns.Args a = new Turns.Args("GemmInterleaved", USAGE, args, OPTIONS);
        GemmShape shape;
        try {
            shape = GemmShape.parse(a.text("shape", "1024"));
        } catch (IllegalArgumentException e) {
            throw a.error(e.getMessage());
        }
        int threads = (int) a.positive("threads", "1", true);
        int rounds = (int) a.positive("rounds", "10", true);
        double seconds = a.positive("seconds", "1", false);
        double warmup = a.positive("warmup", "3", false);
        double flops = 2.0 * shape.M() * shape.N() * shape.K();

        try (GemmBuffers buf = new GemmBuffers(shape, DType.FP32, DType.FP32, 42);
             Parallel pool = new Parallel(threads)) {
            OpenBlas.setThreads(threads);
            FloatPointer pa = OpenBlas.floats(buf.a), pb = OpenBlas.floats(buf.b), pc = OpenBlas.floats(buf.c);
            Runnable accel4j = () -> buf.accel4j(pool, 1f, 1f);
            Runnable openblas = () -> OpenBlas.sgemm(shape, pa, pb, pc);
            System.out.printf(Locale.ROOT, "%s (%d×%d×%d %s), %d thread(s), %d rounds of %.1f s each; %s%n",
                    shape.name(), shape.M(), shape.N(), shape.K(), shape.layout(), threads, rounds, seconds,
                    OpenBlas.describe());
            Turns.compare("accel4j", accel4j, flops, "openblas", openblas, flops, rounds, seconds, warmup);
        }
    }
}
