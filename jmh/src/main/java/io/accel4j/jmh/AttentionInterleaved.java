package io.accel4j.jmh;

import com.sun.management.OperatingSystemMXBean;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.ops.FlashAttention;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@link FlashAttention} and its yardstick, our fp32 GEMM on attention's first product ({@link AttentionBench}'s
 * {@code gemm}: per head {@code S = Q_h·K_hᵀ}, T×T×hs, NT, lda 3C, no mask), taking turns of {@code seconds} in one
 * JVM, as {@link GemmInterleaved} does for the GEMM against OpenBLAS: on a loaded machine the median of the per-round
 * ratios is the figure to compare, and on one thread its per-CPU-second form hardly moves with the load.
 *
 * <pre>
 *   java --add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED -cp jmh/target/benchmarks.jar \
 *       io.accel4j.jmh.AttentionInterleaved [T=64] [B=4] [NH=4] [pass=fwd|fwdbwd] [threads=1] [rounds=8] \
 *       [seconds=1] [warmup=3]
 * </pre>
 * Head size 64. FLOPs are {@link AttentionBench}'s causal count, {@code 2·B·NH·T²·hs} forward (two products, half
 * masked), 3.5× that forward + backward; the GEMM's {@code 2·B·NH·T²·hs} (every head of every sequence).
 */
public final class AttentionInterleaved {

    private static final OperatingSystemMXBean OS =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static final List<String> OPTIONS = List.of("T", "B", "NH", "pass", "threads", "rounds", "seconds",
            "warmup");
    private static final String USAGE = "usage: AttentionInterleaved [T=64] [B=4] [NH=4] [pass=fwd|fwdbwd]"
            + " [threads=1] [rounds=8] [seconds=1] [warmup=3]";
    private static final int HS = AttentionBench.HEAD_SIZE;

    private AttentionInterleaved() {}

    /** GFLOP/s of one turn, per wall second and per CPU second of the process. */
    private record Rate(double wall, double cpu) {}

    public static void main(String[] args) {
        for (String a : args) {
            if (!OPTIONS.contains(a.substring(0, Math.max(a.indexOf('='), 0)))) {
                throw usageError("unknown argument '" + a + "'");
            }
        }
        int T = (int) positive(args, "T", "64", true);
        int B = (int) positive(args, "B", "4", true);
        int NH = (int) positive(args, "NH", "4", true);
        String pass = arg(args, "pass", "fwd");
        if (!pass.equals("fwd") && !pass.equals("fwdbwd")) {
            throw usageError("pass must be fwd or fwdbwd, got '" + pass + "'");
        }
        boolean backward = pass.equals("fwdbwd");
        int threads = (int) positive(args, "threads", "1", true);
        int rounds = (int) positive(args, "rounds", "8", true);
        double seconds = positive(args, "seconds", "1", false);
        double warmup = positive(args, "warmup", "3", false);
        int C = NH * HS;
        double forwardFlops = 2.0 * B * NH * T * T * HS;
        double attFlops = backward ? 3.5 * forwardFlops : forwardFlops;
        double gemmFlops = 2.0 * B * NH * T * T * HS;

        try (Arena arena = Arena.ofShared(); Parallel pool = new Parallel(threads)) {
            SplittableRandom rnd = new SplittableRandom(42);
            MemorySegment qkv = AttentionBench.random(arena, (long) B * T * 3 * C, rnd);
            MemorySegment dout = AttentionBench.random(arena, (long) B * T * C, rnd);
            MemorySegment out = arena.allocate((long) B * T * C * Float.BYTES, 64);
            MemorySegment lse = arena.allocate((long) B * NH * T * Float.BYTES, 64);
            MemorySegment dqkv = arena.allocate(qkv.byteSize(), 64);
            MemorySegment scores = arena.allocate((long) T * T * Float.BYTES, 64);
            Runnable attention = () -> {
                FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH);
                if (backward) {
                    FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
                }
            };
            Runnable gemm = () -> {
                for (int b = 0; b < B; b++) {
                    for (int h = 0; h < NH; h++) {
                        long q = ((long) b * T * 3 * C + (long) h * HS) * Float.BYTES;
                        Gemm.gemm(pool, Layout.NT, T, T, HS, 1f, qkv.asSlice(q), DType.FP32, 3 * C, 1f,
                                qkv.asSlice(q + (long) C * Float.BYTES), DType.FP32, 3 * C, 1f, 0f, scores,
                                DType.FP32, T, null);
                    }
                }
            };
            System.out.printf(Locale.ROOT, "attention %s B %d NH %d T %d hs %d, %d thread(s), %d rounds of %.1f s;"
                    + " ratio = attention GFLOP/s / GEMM GFLOP/s%n", pass, B, NH, T, HS, threads, rounds, seconds);
            rate(attention, warmup, attFlops);
            rate(gemm, warmup, gemmFlops);
            double[] att = new double[rounds], gem = new double[rounds], wall = new double[rounds];
            double[] attCpu = new double[rounds], gemCpu = new double[rounds], cpu = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                Rate a = rate(attention, seconds, attFlops);
                Rate g = rate(gemm, seconds, gemmFlops);
                att[r] = a.wall();
                gem[r] = g.wall();
                wall[r] = a.wall() / g.wall();
                attCpu[r] = a.cpu();
                gemCpu[r] = g.cpu();
                cpu[r] = a.cpu() / g.cpu();
                System.out.printf(Locale.ROOT, "round %2d: attention %6.1f GFLOP/s, gemm %6.1f GFLOP/s, ratio %.3f"
                        + "   per CPU second: %6.1f, %6.1f, ratio %.3f%n", r, att[r], gem[r], wall[r], attCpu[r],
                        gemCpu[r], cpu[r]);
            }
            System.out.printf(Locale.ROOT, "median wall: attention %.1f GFLOP/s, gemm %.1f GFLOP/s, ratio %.3f"
                    + " (min %.3f, max %.3f)%n", median(att), median(gem), median(wall), min(wall), max(wall));
            System.out.printf(Locale.ROOT, "median cpu:  attention %.1f GFLOP/s, gemm %.1f GFLOP/s, ratio %.3f"
                    + " (min %.3f, max %.3f)%n", median(attCpu), median(gemCpu), median(cpu), min(cpu), max(cpu));
        }
    }

    /** Runs {@code work} for at least {@code seconds} (and at least once). */
    private static Rate rate(Runnable work, double seconds, double flops) {
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

    /** The value of {@code name=value} as a number > 0 ({@code whole}: an integer). */
    private static double positive(String[] args, String name, String fallback, boolean whole) {
        String v = arg(args, name, fallback);
        try {
            double x = Double.parseDouble(v);
            if (x > 0 && (!whole || x == Math.rint(x) && x <= 1 << 20)) {
                return x;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw usageError(name + " must be a positive " + (whole ? "whole " : "") + "number, got '" + v + "'");
    }

    /** Prints {@code message} and the usage, exits with status 2 (the exception is never thrown). */
    private static IllegalStateException usageError(String message) {
        System.err.println("AttentionInterleaved: " + message + "; " + USAGE);
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
