package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ReportTest {

    private static final Case GEMM = Case.of("gemm", "cuBLASLt bf16", "square 8192x8192x8192", Flops.gemm(8192, 8192,
            8192), Ceiling.BF16, () -> null);
    private static final Case COPY = Case.of("adamw", "copy DtoD", "bytes 1000", 2000, Ceiling.HBM, () -> null);

    /** 2⁴⁰ FLOP in 2 ms median: 549.8 TFLOP/s, 55.6% of 989. */
    private final Result gemm = Result.ok(GEMM, new Stats(2, 1.5, 7));
    private final Result failed = Result.notRun(COPY, Result.Status.ERROR, "cuMemcpy\tfailed \"badly\"\nline 2");
    private final List<Report.Ratio> ratios = List.of(new Report.Ratio("adamw / copy", 0.9, 0.85),
            new Report.Ratio("other", 0.5, 0.85));

    @Test
    void tableHasAFigureAndItsShareOfThePeakPerCaseAndTheRatios() {
        String table = Report.table(List.of(gemm, failed), ratios);
        List<String> lines = table.lines().toList();
        assertThat(lines).hasSize(6);
        assertThat(lines.get(0)).startsWith("group").contains("median ms", "of peak");
        assertThat(lines.get(1)).contains("cuBLASLt bf16", "square 8192x8192x8192", "2.000", "1.500", " 7 ",
                "549.8", "TFLOP/s", "55.6%", "BF16");
        assertThat(lines.get(2)).contains("copy DtoD", "ERROR: cuMemcpy failed \"badly\" line 2");
        assertThat(lines.get(3)).isEqualTo("adamw / copy: 0.900 (acceptance >= 0.85: PASS)");
        assertThat(lines.get(4)).isEqualTo("other: 0.500 (acceptance >= 0.85: FAIL)");
        assertThat(lines.get(5)).contains("H200", "BF16 989 TFLOP/s", "FP8 1979 TFLOP/s", "TF32 494 TFLOP/s",
                "FP32 67 TFLOP/s", "HBM 4800 GB/s");
    }

    @Test
    void tsvRowsHaveOneFieldPerHeaderColumn() {
        int columns = Report.TSV_HEADER.split("\t").length;
        assertThat(Report.tsv(gemm).split("\t", -1)).hasSize(columns);
        String[] bad = Report.tsv(failed).split("\t", -1);
        assertThat(bad).hasSize(columns);
        assertThat(bad[3]).isEqualTo("ERROR");
        assertThat(bad[4]).isEmpty();
        assertThat(bad[columns - 1]).isEqualTo("cuMemcpy failed \"badly\" line 2");
        assertThat(Report.tsv(gemm).split("\t")[8]).isEqualTo("549.756");
    }

    @Test
    void jsonIsValidAndCarriesEveryResult() {
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("device", "NVIDIA H200, \"141\" GB");
        String json = Report.json(meta, List.of(gemm, failed), ratios);
        new JsonSyntax(json).document();
        assertThat(json).contains("\"device\": \"NVIDIA H200, \\\"141\\\" GB\"", "\"status\": \"OK\"",
                "\"median_ms\": 2,", "\"samples\": 7", "\"median_ms\": null", "\"of_ceiling\": null",
                "\"detail\": \"cuMemcpy\\tfailed \\\"badly\\\"\\nline 2\"", "\"FP8\": {\"per_second\": 1979000000000000,",
                "{\"name\": \"other\", \"value\": 0.5, \"threshold\": 0.85, \"pass\": false}");
        new JsonSyntax(Report.json(Map.of(), List.of(), List.of())).document();
    }

    @Test
    void numbersAndStringsAsJsonWritesThem() {
        assertThat(Report.jsonNum(Double.NaN)).isEqualTo("null");
        assertThat(Report.jsonNum(Double.POSITIVE_INFINITY)).isEqualTo("null");
        assertThat(Report.jsonNum(3)).isEqualTo("3");
        assertThat(Report.jsonNum(0.25)).isEqualTo("0.25");
        assertThat(Report.jsonNum(1e300)).isEqualTo("1.0E300");
        assertThat(Report.quote("a\u0001b\\")).isEqualTo("\"a\\u0001b\\\\\"");
    }

    @Test
    void millisecondsKeepFourDigitsOrSo() {
        assertThat(Report.ms(123.456)).isEqualTo("123.5");
        assertThat(Report.ms(12.3456)).isEqualTo("12.346");
        assertThat(Report.ms(0.0123456)).isEqualTo("0.01235");
    }
}
