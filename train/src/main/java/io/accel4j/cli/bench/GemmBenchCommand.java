package io.accel4j.cli.bench;

import io.accel4j.cli.CliException;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.ref.GemmRef;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j bench gemm}: a short table of accel4j's GEMM ({@link Gemm#gemm}) against the naive reference
 * ({@link GemmRef#gemm}) over shapes, dtypes, layouts and thread counts. {@code C = op(A)·op(B)}, fp32
 * accumulation, C in fp32, A and B seeded uniform in [−1, 1), in a shared arena. Where the reference runs, accel4j's C is also checked
 * against it. Quick figures only: the JMH module is the rigorous measurement.
 */
@Command(name = "gemm", sortOptions = false,
        description = {
            "Time accel4j's GEMM (C = op(A)*op(B), fp32 accumulation, C fp32) and, for small shapes, the naive "
                    + "reference loop; print GFLOP/s and the speed-up.",
            "Quick figures: rigorous ones come from the JMH module (jmh/), see docs/PERFORMANCE.md."})
public final class GemmBenchCommand implements Callable<Integer> {

    private static final Logger LOG = LoggerFactory.getLogger(GemmBenchCommand.class);

    /** Unit roundoff of fp32: 2^-24. */
    private static final double FP32_U = 0x1p-24;

    @Spec
    CommandSpec spec;

    @Option(names = "--sizes", split = ",", paramLabel = "N|MxNxK", defaultValue = "256,512,1024",
            converter = Shape.Converter.class,
            description = "Shapes: N for NxNxN, or MxNxK (default: ${DEFAULT-VALUE}).")
    List<Shape> sizes;

    @Option(names = "--dtypes", split = ",", paramLabel = "DTYPE", defaultValue = "fp32,bf16,fp8_e4m3",
            converter = Names.DTypeConverter.class,
            description = "Element types of A and B: fp32, bf16, fp16, fp8_e4m3 (or fp8), fp8_e5m2 "
                    + "(default: ${DEFAULT-VALUE}).")
    List<DType> dtypes;

    @Option(names = "--layout", split = ",", paramLabel = "NN|NT|TN|TT", defaultValue = "NN",
            converter = Names.LayoutConverter.class,
            description = "Which of A, B are stored transposed (default: ${DEFAULT-VALUE}).")
    List<Layout> layouts;

    @Option(names = "--threads", split = ",", paramLabel = "N",
            description = "Kernel thread counts (default: -Daccel4j.threads, else one per processor).")
    List<Integer> threads;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "2",
            description = "Untimed runs before the timed ones (default: ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = "--warmup-ms", paramLabel = "MS", defaultValue = "200",
            description = "Warm up for at least this long and until the time stops improving (the JIT has "
                    + "compiled the kernel), at most 10 times this long; 0: just --warmup runs "
                    + "(default: ${DEFAULT-VALUE}).")
    long warmupMillis;

    @Option(names = {"-n", "--runs"}, paramLabel = "N", defaultValue = "5",
            description = "Timed runs; the best and the median are reported (default: ${DEFAULT-VALUE}).")
    int runs;

    @Option(names = "--naive-max", paramLabel = "N", defaultValue = "256",
            description = "Run the slow naive reference only for shapes whose largest side is at most N; 0: never "
                    + "(default: ${DEFAULT-VALUE}).")
    int naiveMax;

    @Option(names = "--seed", paramLabel = "N", defaultValue = "42",
            description = "Seed of the random operands (default: ${DEFAULT-VALUE}).")
    long seed;

    @Override
    public Integer call() {
        List<Integer> threadCounts = threadCounts();
        PrintWriter out = spec.commandLine().getOut();
        String threadText = threadCounts.stream().map(String::valueOf).collect(Collectors.joining(","));
        LOG.info("using {}, {} thread{}", Simd.describe(), threadText,
                threadCounts.size() == 1 && threadCounts.getFirst() == 1 ? "" : "s");

        out.println("GEMM C = op(A)*op(B), fp32 accumulation, C fp32; " + Simd.describe() + "; best and median of "
                + runs + " run" + (runs == 1 ? "" : "s") + ", after at least " + warmup + " warm-up run"
                + (warmup == 1 ? "" : "s") + (warmupMillis > 0 ? " and " + warmupMillis + " ms, until stable" : ""));
        out.println();
        int shapeWidth = sizes.stream().mapToInt(s -> s.toString().length()).max().orElse(5);
        Table table = new Table(out,
                new String[] {"shape", "dtype", "layout", "threads", "best ms", "median ms", "GFLOP/s", "vs naive", "check"},
                new int[] {shapeWidth, 8, 6, 7, 9, 9, 8, 8, 8},
                new boolean[] {false, false, false, true, true, true, true, true, false});
        table.header();

        List<String> failures = new ArrayList<>();
        int benchmarks = 0;
        for (Shape shape : sizes) {
            for (DType dtype : dtypes) {
                for (Layout layout : layouts) {
                    benchmarks += threadCounts.size();
                    run(table, shape, dtype, layout, threadCounts, failures);
                }
            }
        }

        out.println();
        out.println("GFLOP/s = 2*M*N*K / best time. vs naive = best time of the naive reference (GemmRef, one thread)"
                + " / accel4j's; the reference runs for shapes up to " + naiveMax + " (--naive-max), and check"
                + " compares the two results.");
        out.println("Quick figures from one JVM: rigorous ones come from the JMH module (jmh/) beside OpenBLAS,"
                + " see docs/PERFORMANCE.md.");
        for (String f : failures) {
            out.println("failed: " + f);
        }
        out.flush();
        if (!failures.isEmpty()) {
            throw new CliException(failures.size() + " of " + benchmarks + " GEMM benchmarks failed; first: "
                    + failures.getFirst());
        }
        return 0;
    }

    private List<Integer> threadCounts() {
        if (runs < 1) {
            throw new ParameterException(spec.commandLine(), "--runs must be >= 1, got " + runs);
        }
        if (warmup < 0) {
            throw new ParameterException(spec.commandLine(), "--warmup must be >= 0, got " + warmup);
        }
        if (warmupMillis < 0) {
            throw new ParameterException(spec.commandLine(), "--warmup-ms must be >= 0, got " + warmupMillis);
        }
        if (naiveMax < 0) {
            throw new ParameterException(spec.commandLine(), "--naive-max must be >= 0, got " + naiveMax);
        }
        if (threads == null || threads.isEmpty()) {
            return List.of(Parallel.defaultThreads());
        }
        for (int t : threads) {
            if (t < 1) {
                throw new ParameterException(spec.commandLine(), "--threads must be >= 1, got " + t);
            }
        }
        return threads;
    }

    /** Times one shape/dtype/layout at every thread count; a failure becomes a row and an entry in failures. */
    private void run(Table table, Shape shape, DType dtype, Layout layout, List<Integer> threadCounts,
                     List<String> failures) {
        String label = shape + " " + Names.name(dtype) + " " + layout;
        long bytes = ((long) shape.m() * shape.k() + (long) shape.k() * shape.n()) * dtype.byteSize()
                + 2L * shape.m() * shape.n() * Float.BYTES;
        try (Arena arena = Arena.ofShared()) { // shared: the kernel threads read it
            Operands op = Operands.random(arena, shape, dtype, layout, seed);
            MemorySegment cNaive = null;
            Timing naive = null;
            if (shape.largestSide() <= naiveMax) {
                MemorySegment c = arena.allocate((long) shape.m() * shape.n() * Float.BYTES, 64);
                naive = Timing.of(Math.min(warmup, 1), warmupMillis, Math.min(runs, 3), () -> GemmRef.gemm(layout,
                        shape.m(), shape.n(), shape.k(), 1f, op.a, dtype, op.lda, 1f, op.b, dtype, op.ldb, 1f,
                        0f, c, DType.FP32, shape.n(), null));
                cNaive = c;
            }
            for (int t : threadCounts) {
                Timing fast;
                try (Parallel pool = new Parallel(t)) {
                    fast = Timing.of(warmup, warmupMillis, runs, () -> Gemm.gemm(pool, layout,
                            shape.m(), shape.n(), shape.k(), 1f, op.a, dtype, op.lda, 1f, op.b, dtype, op.ldb, 1f,
                            0f, op.c, DType.FP32, shape.n(), null));
                }
                String check = "-";
                if (cNaive != null) {
                    double diff = maxAbsDiff(op.c, cNaive, (long) shape.m() * shape.n());
                    double tol = tolerance(shape.k());
                    if (diff <= tol) {
                        check = "ok";
                    } else {
                        check = "MISMATCH";
                        failures.add(label + ": accel4j's C differs from the reference's by up to " + Table.num(diff)
                                + " (tolerance " + Table.num(tol) + ")");
                    }
                }
                table.row(shape.toString(), Names.name(dtype), layout.name(), String.valueOf(t),
                        Table.num(fast.bestMillis()), Table.num(fast.medianMillis()),
                        Table.num(fast.gflops(shape.flops())),
                        naive == null ? "-" : Table.num((double) naive.bestNanos() / fast.bestNanos()) + "x",
                        check);
            }
        } catch (OutOfMemoryError e) {
            failRow(table, shape, dtype, layout, failures,
                    label + ": not enough memory for the operands (" + bytes / (1 << 20) + " MiB)");
        } catch (UnsupportedOperationException e) {
            failRow(table, shape, dtype, layout, failures, label + ": not supported yet (" + e.getMessage() + ")");
        } catch (RuntimeException e) {
            failRow(table, shape, dtype, layout, failures,
                    label + ": " + (e.getMessage() != null ? e.getMessage() : e.toString()));
        }
    }

    private static void failRow(Table table, Shape shape, DType dtype, Layout layout, List<String> failures,
                                String why) {
        failures.add(why);
        table.row(shape.toString(), Names.name(dtype), layout.name(), "-", "failed", "-", "-", "-", "error");
    }

    /**
     * How far two fp32 sums of the same K products, |a|,|b| &lt; 1, may differ when summed in different orders:
     * each is within γ_K·Σ|a·b| ≤ K·u·K of the exact sum (u = 2^-24), so twice that. A loose bound that still catches
     * a wrong product, whose error is of the size of the result itself (~√K/3).
     */
    static double tolerance(int k) {
        return 2.0 * k * FP32_U * k / (1 - k * FP32_U) + 1e-6;
    }

    private static double maxAbsDiff(MemorySegment x, MemorySegment y, long n) {
        double max = 0;
        for (long i = 0; i < n; i++) {
            float a = x.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            float b = y.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            double d = Math.abs((double) a - b);
            if (Double.isNaN(d)) {
                return Double.POSITIVE_INFINITY;
            }
            max = Math.max(max, d);
        }
        return max;
    }

    /** A and B in the dtype under test, stored as the layout says, and C (fp32, poisoned with NaN). */
    private record Operands(MemorySegment a, int lda, MemorySegment b, int ldb, MemorySegment c) {

        static Operands random(Arena arena, Shape s, DType t, Layout layout, long seed) {
            int lda = layout.storedColsA(s.m(), s.k());
            int ldb = layout.storedColsB(s.k(), s.n());
            long aCount = (long) layout.storedRowsA(s.m(), s.k()) * lda;
            long bCount = (long) layout.storedRowsB(s.k(), s.n()) * ldb;
            MemorySegment a = arena.allocate(aCount * t.byteSize(), 64);
            MemorySegment b = arena.allocate(bCount * t.byteSize(), 64);
            MemorySegment c = arena.allocate((long) s.m() * s.n() * Float.BYTES, 64);
            SplittableRandom rnd = new SplittableRandom(seed);
            for (long i = 0; i < aCount; i++) {
                t.setFloat(a, i, (float) (rnd.nextDouble() * 2 - 1), true);
            }
            for (long i = 0; i < bCount; i++) {
                t.setFloat(b, i, (float) (rnd.nextDouble() * 2 - 1), true);
            }
            c.fill((byte) 0xFF); // NaN: beta = 0, so C must be written, never read
            return new Operands(a, lda, b, ldb, c);
        }
    }
}
