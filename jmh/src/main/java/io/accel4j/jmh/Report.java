package io.accel4j.jmh;

import io.accel4j.cpu.FmaProbe;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Turns JMH JSON results ({@code -rf json -rff FILE}) of the GEMM benchmarks into Markdown for
 * {@code docs/PERFORMANCE.md}: one table per benchmark class, a row per shape, thread count and implementation,
 * with GFLOP/s (2·M·N·K per product), its 99.9 % error, the ratio to the class's baseline measured in the same
 * run ({@code openblas} where the class has it, else {@code fp32}) and the fraction of the hardware's fp32 peak.
 *
 * <pre>java -cp jmh/target/benchmarks.jar io.accel4j.jmh.Report [--peak-per-core GFLOPS] [--no-openblas] FILE.json…</pre>
 *
 * The peak per core defaults to the fp32 FMA throughput {@link FmaProbe} measures in this process (run the report on
 * the machine that ran the benchmarks, as {@code jmh/run.sh} does), not pipes × lanes × 2 × {@code /proc/cpuinfo}'s
 * clock, which is a guest's nominal clock and understates it (the nominal figure is printed beside it); it is
 * multiplied by the {@code threads} parameter. Unless {@code --no-openblas}, it also
 * prints the kernel set OpenBLAS picks in this process: run it under the benchmark's environment.
 * Exit codes: 0 done, 1 a file could not be read or parsed, 2 usage error.
 */
public final class Report {

    /** One JMH result: a benchmark method at one parameter combination. */
    record Result(String benchClass, String method, Map<String, String> params, double score, double error,
                  String unit) {}

    private Report() {}

    public static void main(String[] args) {
        Double peakPerCore = null;
        boolean openblas = true;
        List<Path> files = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--peak-per-core" -> {
                    if (i + 1 >= args.length) {
                        usage("--peak-per-core needs a value in GFLOP/s");
                    }
                    try {
                        peakPerCore = Double.parseDouble(args[++i]);
                    } catch (NumberFormatException e) {
                        usage("--peak-per-core: not a number: '" + args[i] + "'");
                    }
                }
                case "--no-openblas" -> openblas = false;
                case "-h", "--help" -> {
                    System.out.println(USAGE);
                    return;
                }
                default -> {
                    if (args[i].startsWith("-")) {
                        usage("unknown option " + args[i]);
                    }
                    files.add(Path.of(args[i]));
                }
            }
        }
        if (files.isEmpty()) {
            usage("no result file given");
        }
        List<Result> results = new ArrayList<>();
        List<Map<String, Object>> raw = new ArrayList<>();
        for (Path f : files) {
            try {
                List<Map<String, Object>> entries = entries(Files.readString(f, StandardCharsets.UTF_8));
                raw.addAll(entries);
                entries.forEach(e -> results.add(result(e)));
            } catch (NoSuchFileException e) {
                System.err.println("accel4j report: no such file: " + f);
                System.exit(1);
            } catch (IOException | RuntimeException e) {
                System.err.println("accel4j report: cannot read " + f + ": " + e.getMessage());
                System.exit(1);
            }
        }
        String peakNote;
        if (peakPerCore != null) {
            peakNote = String.format(Locale.ROOT, "%.1f GFLOP/s per core (given)", peakPerCore);
        } else {
            FmaProbe.Result measured = FmaProbe.peak();
            Peak nominal = Peak.fromCpuinfo();
            peakPerCore = measured.gflops();
            peakNote = measured.describe() + (nominal == null ? "" : "; /proc/cpuinfo's nominal clock would say "
                    + String.format(Locale.ROOT, "%.1f", nominal.gflops()));
        }
        PrintStream out = System.out;
        header(out, raw, peakNote, openblas);
        print(out, results, peakPerCore);
    }

    private static final String USAGE =
            "usage: java -cp benchmarks.jar io.accel4j.jmh.Report [--peak-per-core GFLOPS] [--no-openblas] FILE.json...";

    private static void usage(String why) {
        System.err.println("accel4j report: " + why);
        System.err.println(USAGE);
        System.exit(2);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> entries(String json) {
        Object doc = Json.parse(json);
        if (!(doc instanceof List<?> list)) {
            throw new IllegalArgumentException("not a JMH result file (expected a JSON array)");
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : list) {
            out.add((Map<String, Object>) o);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static Result result(Map<String, Object> e) {
        String bench = (String) e.get("benchmark");
        int dot = bench.lastIndexOf('.');
        String cls = bench.substring(bench.lastIndexOf('.', dot - 1) + 1, dot);
        Map<String, String> params = new LinkedHashMap<>();
        Object p = e.get("params");
        if (p instanceof Map<?, ?> m) {
            m.forEach((k, v) -> params.put((String) k, String.valueOf(v)));
        }
        Map<String, Object> pm = (Map<String, Object>) e.get("primaryMetric");
        return new Result(cls, bench.substring(dot + 1), params, number(pm.get("score")), number(pm.get("scoreError")),
                (String) pm.get("scoreUnit"));
    }

    private static double number(Object o) {
        return o instanceof Double d ? d : Double.NaN; // JMH writes "NaN" as a string, e.g. the error of 1 iteration
    }

    private static void header(PrintStream out, List<Map<String, Object>> raw, String peakNote, boolean openblas) {
        out.println("## Benchmark results");
        out.println();
        if (!raw.isEmpty()) {
            Map<String, Object> e = raw.get(0);
            out.println("- JMH " + e.get("jmhVersion") + ", JDK " + e.get("jdkVersion") + " (" + e.get("vmName") + " "
                    + e.get("vmVersion") + ")");
            out.println("- fork JVM args: `" + String.join(" ", strings(e.get("jvmArgs"))) + "`");
            out.println("- forks " + integer(e.get("forks")) + ", warm-up " + integer(e.get("warmupIterations")) + " × "
                    + e.get("warmupTime") + ", measurement " + integer(e.get("measurementIterations")) + " × "
                    + e.get("measurementTime") + ", mode " + e.get("mode"));
        }
        out.println("- peak: " + peakNote + ", times the `threads` parameter");
        if (openblas) {
            String line;
            try {
                line = OpenBlas.describe();
            } catch (Throwable t) {
                line = "OpenBLAS did not load: " + t;
            }
            out.println("- " + line + " (as loaded by the report, in the benchmark's environment)");
        }
        out.println();
    }

    private static List<String> strings(Object o) {
        List<String> l = new ArrayList<>();
        if (o instanceof List<?> list) {
            list.forEach(x -> l.add(String.valueOf(x)));
        }
        return l;
    }

    private static String integer(Object o) {
        return o instanceof Double d ? Long.toString(Math.round(d)) : String.valueOf(o);
    }

    static void print(PrintStream out, List<Result> results, Double peakPerCore) {
        Map<String, List<Result>> byClass = new LinkedHashMap<>();
        for (Result r : results) {
            byClass.computeIfAbsent(r.benchClass(), k -> new ArrayList<>()).add(r);
        }
        byClass.forEach((cls, rs) -> table(out, cls, rs, peakPerCore));
    }

    private static void table(PrintStream out, String cls, List<Result> rs, Double peakPerCore) {
        java.lang.reflect.Method work = Work.finder(cls);
        if (work != null) {
            kernelTable(out, cls, rs, work);
            return;
        }
        Set<String> methods = new LinkedHashSet<>();
        Set<Map<String, String>> combos = new LinkedHashSet<>();
        Map<String, Result> byKey = new LinkedHashMap<>();
        for (Result r : rs) {
            methods.add(r.method());
            combos.add(r.params());
            byKey.put(r.method() + " " + r.params(), r);
        }
        String baseline = methods.contains("openblas") ? "openblas" : methods.contains("fp32") ? "fp32" : null;
        out.println("### " + cls + (baseline == null ? "" : " (baseline: " + baseline + ")"));
        out.println();
        out.println("| shape | M×N×K layout | threads | implementation | GFLOP/s | ± | × " + (baseline == null ? "baseline" : baseline)
                + " | of peak |");
        out.println("|---|---|---:|---|---:|---:|---:|---:|");
        for (Map<String, String> params : combos) {
            Map<String, String> other = new LinkedHashMap<>(params);
            String shapeName = other.remove("shape");
            String threadsValue = other.remove("threads");
            int threads = threadsValue == null ? 1 : Integer.parseInt(threadsValue);
            GemmShape shape = null;
            try {
                shape = shapeName == null ? null : GemmShape.parse(shapeName);
            } catch (IllegalArgumentException e) {
                // unknown shape: no GFLOP/s, the raw score is shown instead
            }
            Result base = baseline == null ? null : byKey.get(baseline + " " + params);
            double baseG = base == null || shape == null ? Double.NaN : gflops(base, shape.flops())[0];
            List<String> order = new ArrayList<>(methods); // the baseline first, then the others as measured
            if (baseline != null) {
                order.remove(baseline);
                order.add(0, baseline);
            }
            for (String m : order) {
                Result r = byKey.get(m + " " + params);
                if (r == null) {
                    continue;
                }
                String shapeCell = (shapeName == null ? "—" : shapeName) + (other.isEmpty() ? "" : " " + other);
                String dims = shape == null ? "—" : shape.describe().replace('x', '×');
                String gCell;
                String eCell;
                String ratio = "—";
                String peak = "—";
                if (shape != null) {
                    double[] g = gflops(r, shape.flops());
                    gCell = fmt("%.1f", g[0]);
                    eCell = fmt("%.1f", g[1]);
                    if (!Double.isNaN(baseG)) {
                        ratio = fmt("%.2f", g[0] / baseG);
                    }
                    if (peakPerCore != null) {
                        peak = fmt("%.0f %%", 100 * g[0] / (peakPerCore * threads));
                    }
                } else {
                    gCell = fmt("%.3g", r.score()) + " " + r.unit();
                    eCell = fmt("%.2g", r.error());
                }
                out.println("| " + shapeCell + " | " + dims + " | " + (threadsValue == null ? "1" : threadsValue) + " | "
                        + m + " | " + gCell + " | " + eCell + " | " + ratio + " | " + peak + " |");
            }
        }
        out.println();
    }

    /**
     * A kernel benchmark's table: each method's rate from its declared {@link Work}, and its ratio to the baseline
     * method the work names, at the same parameters.
     */
    private static void kernelTable(PrintStream out, String cls, List<Result> rs, java.lang.reflect.Method finder) {
        Map<String, Result> byKey = new LinkedHashMap<>();
        for (Result r : rs) {
            byKey.put(r.method() + " " + r.params(), r);
        }
        out.println("### " + cls);
        out.println();
        out.println("| parameters | implementation | rate | ± | × baseline (which) |");
        out.println("|---|---|---:|---:|---:|");
        for (Result r : rs) {
            Work w = Work.of(finder, r.method(), r.params());
            double[] rate = gflops(r, w.amount()); // amount/s ÷ 10⁹: GB/s or GFLOP/s alike
            String ratio = "—";
            if (w.baseline() != null) {
                Result base = byKey.get(w.baseline() + " " + r.params());
                if (base != null) {
                    Work bw = Work.of(finder, base.method(), base.params());
                    ratio = fmt("%.2f", rate[0] / gflops(base, bw.amount())[0]) + " (" + w.baseline() + ")";
                }
            }
            out.println("| " + r.params() + " | " + r.method() + " | " + fmt("%.1f", rate[0]) + " "
                    + w.unit().rate() + " | " + fmt("%.1f", rate[1]) + " | " + ratio + " |");
        }
        out.println();
    }

    private static String fmt(String f, double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "—" : String.format(Locale.ROOT, f, v);
    }

    /**
     * GFLOP/s and its error for a result in a throughput unit ({@code ops/s}, linear) or a time unit
     * ({@code ms/op}: the half-width of the interval the time error maps to).
     */
    static double[] gflops(Result r, double flops) {
        String[] u = r.unit().split("/");
        if (u.length != 2) {
            return new double[] {Double.NaN, Double.NaN};
        }
        if (u[0].equals("ops")) {
            double perSecond = 1 / seconds(u[1]);
            return new double[] {r.score() * perSecond * flops / 1e9, r.error() * perSecond * flops / 1e9};
        }
        if (u[1].equals("op")) {
            double sec = seconds(u[0]);
            double g = flops / (r.score() * sec) / 1e9;
            double lo = r.score() + r.error();
            double hi = r.score() - r.error();
            double err = hi > 0 ? (flops / (hi * sec) - flops / (lo * sec)) / 2 / 1e9 : Double.NaN;
            return new double[] {g, err};
        }
        return new double[] {Double.NaN, Double.NaN};
    }

    private static double seconds(String unit) {
        return switch (unit) {
            case "ns" -> 1e-9;
            case "us" -> 1e-6;
            case "ms" -> 1e-3;
            case "s" -> 1;
            case "min" -> 60;
            default -> Double.NaN;
        };
    }

    /** The fp32 FMA peak of one core: pipes × lanes × 2 flops × clock. */
    record Peak(int pipes, int lanes, double mhz, String simd) {

        double gflops() {
            return pipes * lanes * 2 * mhz / 1000;
        }

        String describe() {
            return String.format(Locale.ROOT,
                    "%.1f GFLOP/s per core (assumed: %d FMA pipes × %d fp32 lanes (%s) × 2 flops × %.0f MHz from "
                            + "/proc/cpuinfo; override with --peak-per-core)", gflops(), pipes, lanes, simd, mhz);
        }

        /** From {@code /proc/cpuinfo}, or null where it is absent or says nothing useful. */
        static Peak fromCpuinfo() {
            try {
                String info = Files.readString(Path.of("/proc/cpuinfo"));
                double mhz = Double.NaN;
                String flags = "";
                for (String line : info.split("\n")) {
                    if (Double.isNaN(mhz) && line.startsWith("cpu MHz")) {
                        mhz = Double.parseDouble(line.substring(line.indexOf(':') + 1).trim());
                    } else if (flags.isEmpty() && line.startsWith("flags")) {
                        flags = " " + line.substring(line.indexOf(':') + 1).trim() + " ";
                    }
                }
                if (Double.isNaN(mhz)) {
                    return null;
                }
                if (flags.contains(" avx512f ")) {
                    return new Peak(2, 16, mhz, "AVX-512");
                }
                if (flags.contains(" avx2 ") && flags.contains(" fma ")) {
                    return new Peak(2, 8, mhz, "AVX2+FMA");
                }
                return new Peak(2, 4, mhz, "SSE");
            } catch (IOException | RuntimeException e) {
                return null;
            }
        }
    }
}
