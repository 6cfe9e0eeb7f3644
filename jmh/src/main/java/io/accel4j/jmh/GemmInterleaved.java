package io.accel4j.jmh;

import com.sun.management.OperatingSystemMXBean;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
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

    private static final OperatingSystemMXBean OS =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static final List<String> OPTIONS = List.of("shape", "threads", "rounds", "seconds", "warmup");
    private static final String USAGE = "usage: GemmInterleaved [shape=1024] [threads=1] [rounds=10] [seconds=1]"
            + " [warmup=3]";

    private GemmInterleaved() {}

    /** GFLOP/s of one turn, per wall second and per CPU second of the process. */
    private record Rate(double wall, double cpu) {}

    public static void main(String[] args) {
        for (String a : args) {
            if (!OPTIONS.contains(a.substring(0, Math.max(a.indexOf('='), 0)))) {
                throw usageError("unknown argument '" + a + "'");
            }
        }
        GemmShape shape = shape(arg(args, "shape", "1024"));
        int threads = (int) positive(args, "threads", "1");
        int rounds = (int) positive(args, "rounds", "10");
        double seconds = positive(args, "seconds", "1");
        double warmup = positive(args, "warmup", "3");
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
            rate(accel4j, warmup, flops);
            rate(openblas, warmup, flops);
            double[] ours = new double[rounds], theirs = new double[rounds], wall = new double[rounds];
            double[] oursCpu = new double[rounds], theirsCpu = new double[rounds], cpu = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                Rate o = rate(accel4j, seconds, flops);
                Rate t = rate(openblas, seconds, flops);
                ours[r] = o.wall();
                theirs[r] = t.wall();
                wall[r] = o.wall() / t.wall();
                oursCpu[r] = o.cpu();
                theirsCpu[r] = t.cpu();
                cpu[r] = o.cpu() / t.cpu();
                System.out.printf(Locale.ROOT, "round %2d: accel4j %6.1f GFLOP/s, openblas %6.1f GFLOP/s, ratio %.3f"
                        + "   per CPU second: %6.1f, %6.1f, ratio %.3f%n",
                        r, ours[r], theirs[r], wall[r], oursCpu[r], theirsCpu[r], cpu[r]);
            }
            System.out.printf(Locale.ROOT, "median wall: accel4j %.1f GFLOP/s, openblas %.1f GFLOP/s, ratio %.3f"
                    + " (min %.3f, max %.3f)%n", median(ours), median(theirs), median(wall), min(wall), max(wall));
            System.out.printf(Locale.ROOT, "median cpu:  accel4j %.1f GFLOP/s, openblas %.1f GFLOP/s, ratio %.3f"
                    + " (min %.3f, max %.3f)%n", median(oursCpu), median(theirsCpu), median(cpu), min(cpu), max(cpu));
        }
    }

    /** Runs {@code product} for at least {@code seconds} (and at least once). */
    private static Rate rate(Runnable product, double seconds, double flops) {
        long cpu0 = OS.getProcessCpuTime();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long n = 0;
        long now;
        do {
            product.run();
            n++;
            now = System.nanoTime();
        } while (now < end);
        long cpu = OS.getProcessCpuTime() - cpu0;
        return new Rate(n * flops / (now - start), n * flops / Math.max(cpu, 1));
    }

    private static double min(double[] x) {
        return Arrays.stream(x).min().orElse(Double.NaN);
    }

    private static double max(double[] x) {
        return Arrays.stream(x).max().orElse(Double.NaN);
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    /** The value of {@code name=value} as a number > 0 (whole for threads and rounds). */
    private static double positive(String[] args, String name, String fallback) {
        String v = arg(args, name, fallback);
        boolean whole = name.equals("threads") || name.equals("rounds");
        try {
            double x = Double.parseDouble(v);
            if (x > 0 && (!whole || x == Math.rint(x))) {
                return x;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw usageError(name + " must be a positive " + (whole ? "whole " : "") + "number, got '" + v + "'");
    }

    private static GemmShape shape(String name) {
        try {
            return GemmShape.parse(name);
        } catch (IllegalArgumentException e) {
            throw usageError(e.getMessage());
        }
    }

    /** Prints {@code message} and the usage, exits with status 2 (the exception is never thrown). */
    private static IllegalStateException usageError(String message) {
        System.err.println("GemmInterleaved: " + message + "; " + USAGE);
        System.exit(2);
        return new IllegalStateException(message);
    }

    /** The value of {@code name=value} among {@code args}, or {@code fallback}. */
    private static String arg(String[] args, String name, String fallback) {
        for (String a : args) {
            if (a.startsWith(name + "=")) {
                return a.substring(name.length() + 1);
            }
        }
        return fallback;
    }
}
