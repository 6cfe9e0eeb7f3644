package io.accel4j.jmh;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ReportTest {

    /** Two entries cut down from a real {@code -rf json} file; one has JMH's string "NaN" as its error. */
    private static final String JSON = """
            [
                {
                    "jmhVersion" : "1.37",
                    "benchmark" : "io.accel4j.jmh.GemmBench.accel4j",
                    "mode" : "thrpt",
                    "threads" : 1,
                    "forks" : 1,
                    "jvmArgs" : [ "--add-modules=jdk.incubator.vector" ],
                    "params" : { "shape" : "1024", "threads" : "2" },
                    "primaryMetric" : {
                        "score" : 30.0,
                        "scoreError" : 1.5,
                        "scoreConfidence" : [ 28.5, 31.5 ],
                        "scoreUnit" : "ops/s",
                        "rawData" : [ [ 29.0, 31.0 ] ]
                    },
                    "secondaryMetrics" : { }
                },
                {
                    "jmhVersion" : "1.37",
                    "benchmark" : "io.accel4j.jmh.GemmBench.openblas",
                    "mode" : "thrpt",
                    "params" : { "shape" : "1024", "threads" : "2" },
                    "primaryMetric" : { "score" : 40.0, "scoreError" : "NaN", "scoreUnit" : "ops/s" },
                    "secondaryMetrics" : { "note" : "a \\"quoted\\" \\u00e9" }
                }
            ]
            """;

    @Test
    void readsJmhResults() {
        List<Map<String, Object>> entries = Report.entries(JSON);
        assertThat(entries).hasSize(2);
        Report.Result r = Report.result(entries.get(0));
        assertThat(r.benchClass()).isEqualTo("GemmBench");
        assertThat(r.method()).isEqualTo("accel4j");
        assertThat(r.params()).containsExactly(Map.entry("shape", "1024"), Map.entry("threads", "2"));
        assertThat(r.score()).isEqualTo(30.0);
        assertThat(Report.result(entries.get(1)).error()).isNaN();
    }

    @Test
    void gflopsFromThroughputAndFromTime() {
        double flops = 2.0 * 1024 * 1024 * 1024;
        double[] g = Report.gflops(new Report.Result("C", "m", Map.of(), 30, 1.5, "ops/s"), flops);
        assertThat(g[0]).isCloseTo(30 * flops / 1e9, within(1e-9));
        assertThat(g[1]).isCloseTo(1.5 * flops / 1e9, within(1e-9));
        double[] t = Report.gflops(new Report.Result("C", "m", Map.of(), 100, 0, "ms/op"), flops);
        assertThat(t[0]).isCloseTo(10 * flops / 1e9, within(1e-9));
        assertThat(t[1]).isCloseTo(0, within(1e-9));
    }

    @Test
    void printsOneTableWithTheRatioToTheBaseline() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        List<Report.Result> results = Report.entries(JSON).stream().map(Report::result).toList();
        Report.print(new PrintStream(bytes, true, StandardCharsets.UTF_8), results, 50.0);
        String md = bytes.toString(StandardCharsets.UTF_8);
        assertThat(md).contains("### GemmBench (baseline: openblas)");
        // 1024³: 2.147 GFLOP per product; 40/s = 85.9 GFLOP/s, 30/s = 64.4 GFLOP/s; peak 2 × 50.
        assertThat(md).contains("| 1024 | 1024×1024×1024 NN | 2 | openblas | 85.9 | — | 1.00 | 86 % |");
        assertThat(md).contains("| 1024 | 1024×1024×1024 NN | 2 | accel4j | 64.4 | 3.2 | 0.75 | 64 % |");
        assertThat(md.indexOf("openblas |")).isLessThan(md.indexOf("accel4j |"));
    }

    @Test
    void kernelBenchmarksAreCountedByTheirOwnWorkMethod() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Map<String, String> params = Map.of("n", "1000000");
        List<Report.Result> results = List.of(
                new Report.Result("FakeKernelBench", "copy", params, 1000, 10, "ops/s"),
                new Report.Result("FakeKernelBench", "kernel", params, 500, 5, "ops/s"));
        Report.print(new PrintStream(bytes, true, StandardCharsets.UTF_8), results, 50.0);
        String md = bytes.toString(StandardCharsets.UTF_8);
        // copy: 8 MB × 1000/s = 8 GB/s; kernel: 12 MB × 500/s = 6 GB/s, 0.75 of the copy.
        assertThat(md).contains("| {n=1000000} | copy | 8.0 GB/s | 0.1 | — |");
        assertThat(md).contains("| {n=1000000} | kernel | 6.0 GB/s | 0.1 | 0.75 (copy) |");
    }

    @Test
    void refusesBrokenJson() {
        assertThatThrownBy(() -> Report.entries("[ { \"a\" : 1 ")).hasMessageContaining("offset");
        assertThatThrownBy(() -> Report.entries("{ }")).hasMessageContaining("expected a JSON array");
    }
}
