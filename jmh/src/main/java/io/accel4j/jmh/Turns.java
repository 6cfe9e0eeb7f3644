package io.accel4j.jmh;

import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Two workloads taking turns in one JVM, for comparisons on a noisy machine ({@link GemmInterleaved},
 * {@link AttentionInterleaved}): JMH measures two benchmarks in forks minutes apart, while here each round runs the
 * first for {@code seconds}, then the second for as long, and reports both rates and their ratio; the median ratio
 * over the rounds is the figure to compare. Each turn's rate is given per wall second and per CPU second of the
 * process (all its threads): on a shared machine a thread that another process preempts loses wall time but not CPU
 * time, so on one thread the CPU rate and its ratio hardly move with the load.
 */
final class Turns {

    private static final OperatingSystemMXBean OS =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /**
     * Each turn starts with this long untimed: the other workload's idle threads may still be spinning (OpenBLAS's
     * spin for up to 2^28 cycles after a call, tens of milliseconds, before they sleep), which on two cores takes one
     * from the turn that follows. Without it, accel4j's two-thread turns after OpenBLAS's lost 5–10 % at gpt2-dinp
     * against the same product alone in a JVM.
     */
    static final double SETTLE_SECONDS = 0.2;

    private Turns() {}

    /** GFLOP/s of one turn, per wall second and per CPU second of the process. */
    record Rate(double wall, double cpu) {}

    /**
     * Runs each workload for {@code warmup} seconds untimed (a Vector API kernel measured before C2 compiled it runs
     * an order of magnitude slower), then {@code rounds} rounds of a turn each (each after {@link #SETTLE_SECONDS}
     * untimed), printing every round and the medians;
     * {@code flopsA}/{@code flopsB} are one call's floating-point operations.
     */
    static void compare(String nameA, Runnable a, double flopsA, String nameB, Runnable b, double flopsB, int rounds,
                        double seconds, double warmup) {
        rate(a, warmup, flopsA);
        rate(b, warmup, flopsB);
        double[] wallA = new double[rounds], wallB = new double[rounds], wall = new double[rounds];
        double[] cpuA = new double[rounds], cpuB = new double[rounds], cpu = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            rate(a, SETTLE_SECONDS, flopsA);
            Rate x = rate(a, seconds, flopsA);
            rate(b, SETTLE_SECONDS, flopsB);
            Rate y = rate(b, seconds, flopsB);
            wallA[r] = x.wall();
            wallB[r] = y.wall();
            wall[r] = x.wall() / y.wall();
            cpuA[r] = x.cpu();
            cpuB[r] = y.cpu();
            cpu[r] = x.cpu() / y.cpu();
            System.out.printf(Locale.ROOT, "round %2d: %s %6.1f GFLOP/s, %s %6.1f GFLOP/s, ratio %.3f"
                    + "   per CPU second: %6.1f, %6.1f, ratio %.3f%n", r, nameA, wallA[r], nameB, wallB[r], wall[r],
                    cpuA[r], cpuB[r], cpu[r]);
        }
        System.out.printf(Locale.ROOT, "median wall: %s %.1f GFLOP/s, %s %.1f GFLOP/s, ratio %.3f (min %.3f, max %.3f)%n",
                nameA, median(wallA), nameB, median(wallB), median(wall), min(wall), max(wall));
        System.out.printf(Locale.ROOT, "median cpu:  %s %.1f GFLOP/s, %s %.1f GFLOP/s, ratio %.3f (min %.3f, max %.3f)%n",
                nameA, median(cpuA), nameB, median(cpuB), median(cpu), min(cpu), max(cpu));
    }

    /** Runs {@code work} for at least {@code seconds} (and at least once). */
    static Rate rate(Runnable work, double seconds, double flops) {
        long cpu0 = OS.getProcessCpuTime();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long n = 0;
        long now;
        do {
            work.run();
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

    /** A harness's {@code name=value} arguments; a bad one prints a line and the usage, and exits 2. */
    record Args(String program, String usage, String[] values) {

        Args(String program, String usage, String[] values, List<String> options) {
            this(program, usage, values);
            for (String a : values) {
                if (!options.contains(a.substring(0, Math.max(a.indexOf('='), 0)))) {
                    throw error("unknown argument '" + a + "'");
                }
            }
        }

        /** The value of {@code name=value}, or {@code fallback}. */
        String text(String name, String fallback) {
            for (String a : values) {
                if (a.startsWith(name + "=")) {
                    return a.substring(name.length() + 1);
                }
            }
            return fallback;
        }

        /** The value of {@code name=value} as a number > 0 ({@code whole}: an integer up to 2²⁰). */
        double positive(String name, String fallback, boolean whole) {
            String v = text(name, fallback);
            try {
                double x = Double.parseDouble(v);
                if (x > 0 && (!whole || x == Math.rint(x) && x <= 1 << 20)) {
                    return x;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw error(name + " must be a positive " + (whole ? "whole " : "") + "number, got '" + v + "'");
        }

        /** Prints {@code message} and the usage, exits with status 2 (the exception is never thrown). */
        IllegalStateException error(String message) {
            System.err.println(program + ": " + message + "; " + usage);
            System.exit(2);
            return new IllegalStateException(message);
        }
    }
}
