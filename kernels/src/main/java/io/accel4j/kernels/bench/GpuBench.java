package io.accel4j.kernels.bench;

import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The GPU benchmarks as a plain program (the JMH module does not run on the GPU machine; see
 * {@code scripts/gpu-check.sh}): GEMM ({@link GemmCases}), AdamW against a copy ({@link AdamWCases}) and attention
 * ({@link AttentionCases}), timed with CUDA events ({@link Measurement}) within a total time budget. Prints a line
 * per case as it finishes and the table last; with {@code --out DIR} writes {@code bench.tsv} (row by row),
 * {@code bench.json} and {@code table.txt} there.
 *
 * <p>Exit codes: 0 every case ran or was skipped, 1 a case failed (or the run did), 2 usage error, 3 no usable GPU
 * ({@code no GPU: <the probe's reason>} on stderr).
 */
public final class GpuBench {

    static final int EXIT_OK = 0;
    static final int EXIT_FAILED = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_NO_GPU = 3;

    static final Set<String> GROUPS = Set.of("gemm", "adamw", "attention", "tma");
    static final String USAGE = "usage: GpuBench [--out DIR] [--budget-s SECONDS (240)] [--case-s SECONDS (2)]"
            + " [--only gemm,adamw,attention,tma] [--seed N] [--debug] [--list: print the cases, run nothing]";

    /** The parsed command line. */
    record Options(Path out, double budgetSeconds, double caseSeconds, Set<String> groups, long seed, boolean debug,
                   boolean list) {

        static Options parse(String[] args) {
            Path out = null;
            double budget = 240;
            double perCase = 2;
            Set<String> groups = GROUPS;
            long seed = 20261202L;
            boolean debug = false;
            boolean list = false;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--debug" -> debug = true;
                    case "--list" -> list = true;
                    case "--out" -> out = Path.of(value(args, ++i, a));
                    case "--budget-s" -> budget = seconds(value(args, ++i, a), a);
                    case "--case-s" -> perCase = seconds(value(args, ++i, a), a);
                    case "--seed" -> seed = number(value(args, ++i, a), a);
                    case "--only" -> {
                        groups = Set.of(value(args, ++i, a).split(","));
                        for (String g : groups) {
                            if (!GROUPS.contains(g)) {
                                throw new IllegalArgumentException("--only takes " + String.join(",", GROUPS.stream()
                                        .sorted().toList()) + ", got " + g);
                            }
                        }
                    }
                    default -> throw new IllegalArgumentException("unknown argument " + a);
                }
            }
            return new Options(out, budget, perCase, groups, seed, debug, list);
        }

        private static String value(String[] args, int i, String option) {
            if (i >= args.length) {
                throw new IllegalArgumentException(option + " needs a value");
            }
            return args[i];
        }

        private static double seconds(String v, String option) {
            try {
                double s = Double.parseDouble(v);
                if (s > 0 && s < 1e6) {
                    return s;
                }
            } catch (NumberFormatException e) {
                // the message below
            }
            throw new IllegalArgumentException(option + " takes seconds > 0, got " + v);
        }

        private static long number(String v, String option) {
            try {
                return Long.parseLong(v);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(option + " takes an integer, got " + v);
            }
        }
    }

    private GpuBench() {}

    public static void main(String[] args) {
        System.exit(run(args, Cuda::probe, System.out, System.err));
    }

    /** The whole program; returns the exit code. {@code probe} is {@link Cuda#probe} but for tests. */
    static int run(String[] args, Supplier<CudaProbe> probe, PrintStream out, PrintStream err) {
        Options o;
        try {
            o = Options.parse(args);
        } catch (IllegalArgumentException e) {
            err.println("gpu-bench: " + e.getMessage());
            err.println(USAGE);
            return EXIT_USAGE;
        }
        if (o.list()) {
            List<Case> cases = cases(o.groups(), null);
            for (Case c : cases) {
                out.printf(Locale.ROOT, "%-9s %-24s %-28s %.4g %s%s%n", c.group(), c.kernel(), c.shape(), c.work(),
                        c.ceiling().unit().equals("GB/s") ? "bytes" : "FLOP",
                        c.skipReason() == null ? "" : "  (skipped: " + c.skipReason() + ")");
            }
            out.println(cases.size() + " cases");
            return EXIT_OK;
        }
        CudaProbe p = probe.get();
        if (!p.ready()) {
            err.println("gpu-bench: no GPU: " + p.describe());
            return EXIT_NO_GPU;
        }
        try {
            return bench(o, p, out);
        } catch (RuntimeException | OutOfMemoryError e) {
            err.println("gpu-bench: failed: " + BenchRunner.message(e));
            if (o.debug()) {
                e.printStackTrace(err);
            }
            return EXIT_FAILED;
        }
    }

    private static int bench(Options o, CudaProbe p, PrintStream out) {
        out.println("gpu-bench: " + p.describe());
        if (p instanceof CudaProbe.Ready r && !r.deviceName().contains("H200")) {
            out.println("gpu-bench: the 'of peak' column is against the " + Ceiling.GPU + ", not this " + r.deviceName());
        }
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("device", p.describe());
        meta.put("seed", Long.toString(o.seed()));
        meta.put("budget_s", Double.toString(o.budgetSeconds()));
        meta.put("case_s", Double.toString(o.caseSeconds()));
        meta.put("timing", "CUDA events on the default stream; median and min of per-call times");
        try (CudaContext context = Cuda.open(0);
             BenchDevice d = new BenchDevice(context, o.seed());
             EventTimer timer = new EventTimer(context);
             Rows rows = new Rows(o.out())) {
            meta.put("backend", d.ops.describe());
            List<Case> cases = cases(o.groups(), d);
            out.printf(Locale.ROOT, "gpu-bench: %d cases, budget %.0f s (%.1f s a case), seed %d%n", cases.size(),
                    o.budgetSeconds(), o.caseSeconds(), o.seed());
            Budget budget = new Budget(System::nanoTime, Budget.nanos(o.budgetSeconds()),
                    Budget.nanos(o.caseSeconds()));
            int[] done = {0};
            List<Result> results = BenchRunner.run(cases, timer, budget, r -> {
                out.println(progress(++done[0], cases.size(), r));
                rows.add(r);
            });
            List<Report.Ratio> ratios = Acceptance.ratios(results);
            String table = Report.table(results, ratios);
            rows.finish(Report.json(meta, results, ratios), table);
            out.println();
            out.print(table);
            return results.stream().anyMatch(r -> r.status() == Result.Status.ERROR) ? EXIT_FAILED : EXIT_OK;
        }
    }

    /** The cases of {@code groups} on {@code d} (which only the cases' set-up uses: null lists them). */
    static List<Case> cases(Set<String> groups, BenchDevice d) {
        List<Case> cases = new ArrayList<>();
        // cheapest first, so that a short budget still covers every group
        if (groups.contains("gemm")) {
            cases.addAll(GemmCases.cases(d, GemmCases.variants()));
        }
        if (groups.contains("adamw")) {
            cases.addAll(AdamWCases.cases(d));
        }
        if (groups.contains("attention")) {
            cases.addAll(AttentionCases.cases(d, AttentionCases.kernels(d)));
        }
        if (groups.contains("tma")) { // last: the kernel new to hardware
            cases.addAll(AttentionCases.cases(d, AttentionCases.tmaKernels(d)));
        }
        return cases;
    }

    /** {@code [3/50] gemm cuBLASLt bf16 square 8192x8192x8192: 712.4 TFLOP/s (72.0% of BF16)}. */
    static String progress(int i, int n, Result r) {
        String head = String.format(Locale.ROOT, "[%d/%d] %s %s %s: ", i, n, r.group(), r.kernel(), r.shape());
        if (!r.ok()) {
            return head + r.status() + " " + r.detail();
        }
        return head + String.format(Locale.ROOT, "%.1f %s (%.1f%% of %s), median %s ms over %d", r.value(),
                r.ceiling().unit(), 100 * r.ofCeiling(), r.ceiling().name(), Report.ms(r.stats().medianMs()),
                r.stats().samples());
    }

    /** The files under {@code --out}: the TSV written row by row, the JSON and the table at the end. */
    static final class Rows implements AutoCloseable {
        private final Path dir;
        private final BufferedWriter tsv;

        Rows(Path dir) {
            this.dir = dir;
            if (dir == null) {
                tsv = null;
                return;
            }
            try {
                Files.createDirectories(dir);
                tsv = Files.newBufferedWriter(dir.resolve("bench.tsv"), StandardCharsets.UTF_8);
                tsv.write(Report.TSV_HEADER);
                tsv.newLine();
                tsv.flush();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write under --out " + dir + ": " + e.getMessage(), e);
            }
        }

        void add(Result r) {
            if (tsv == null) {
                return;
            }
            try {
                tsv.write(Report.tsv(r));
                tsv.newLine();
                tsv.flush();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write " + dir.resolve("bench.tsv") + ": " + e.getMessage(), e);
            }
        }

        void finish(String json, String table) {
            if (dir == null) {
                return;
            }
            try {
                Files.writeString(dir.resolve("bench.json"), json, StandardCharsets.UTF_8);
                Files.writeString(dir.resolve("table.txt"), table, StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write under " + dir + ": " + e.getMessage(), e);
            }
        }

        @Override
        public void close() {
            if (tsv != null) {
                try {
                    tsv.close();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
        }
    }
}
