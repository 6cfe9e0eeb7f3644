package io.accel4j.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cpu.Parallel;
import java.util.List;
import org.junit.jupiter.api.Test;

class BenchGemmE2ETest {

    /** Columns of the table: shape dtype layout threads best-ms median-ms GFLOP/s vs-naive check. */
    private static final int DTYPE = 1, LAYOUT = 2, THREADS = 3, BEST_MS = 4, GFLOPS = 6, VS_NAIVE = 7, CHECK = 8;

    @Test
    void printsOneCheckedRowPerDtype() {
        Cli.Result r = Cli.run("bench", "gemm", "--sizes", "32", "--dtypes", "fp32,bf16", "--warmup", "1", "--runs", "2");

        assertThat(r.exitCode()).as("exit code; stderr: %s", r.err()).isZero();
        List<String[]> rows = rows(r, "32x32x32");
        assertThat(rows).extracting(c -> c[DTYPE]).containsExactly("fp32", "bf16");
        for (String[] c : rows) {
            assertThat(c).hasSize(9);
            assertThat(c[LAYOUT]).isEqualTo("NN");
            assertThat(Integer.parseInt(c[THREADS])).isEqualTo(Parallel.defaultThreads());
            assertThat(Double.parseDouble(c[BEST_MS])).isPositive();
            assertThat(Double.parseDouble(c[GFLOPS])).isPositive();
            assertThat(c[VS_NAIVE]).matches("[0-9.]+x"); // 32 <= --naive-max: the reference ran
            assertThat(c[CHECK]).isEqualTo("ok");
        }
        assertThat(r.out()).contains("GFLOP/s").contains("JMH").contains("docs/PERFORMANCE.md");
    }

    @Test
    void coversLayoutsThreadsAndNonSquareShapes() {
        Cli.Result r = Cli.run("bench", "gemm", "--sizes", "16x24x8", "--dtypes", "fp32", "--layout", "nt,TN",
                "--threads", "1,2", "--warmup", "0", "--warmup-ms", "0", "--runs", "1");

        assertThat(r.exitCode()).as("exit code; stderr: %s", r.err()).isZero();
        List<String[]> rows = rows(r, "16x24x8");
        assertThat(rows).extracting(c -> c[LAYOUT] + "/" + c[THREADS]).containsExactly("NT/1", "NT/2", "TN/1", "TN/2");
        assertThat(rows).allSatisfy(c -> assertThat(c[CHECK]).isEqualTo("ok"));
    }

    @Test
    void skipsTheNaiveReferenceAboveNaiveMax() {
        Cli.Result r = Cli.run("bench", "gemm", "--sizes", "24", "--dtypes", "fp32", "--naive-max", "16",
                "--warmup", "0", "--warmup-ms", "0", "--runs", "1");

        assertThat(r.exitCode()).as("exit code; stderr: %s", r.err()).isZero();
        assertThat(rows(r, "24x24x24")).singleElement().satisfies(c -> {
            assertThat(c[VS_NAIVE]).isEqualTo("-");
            assertThat(c[CHECK]).isEqualTo("-");
        });
    }

    @Test
    void aBadSizeIsAUsageErrorOnOneLine() {
        Cli.Result r = Cli.run("bench", "gemm", "--sizes", "banana");

        assertThat(r.exitCode()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.errLines()).singleElement().asString()
                .startsWith("accel4j: error: ")
                .contains("--sizes", "'banana'", "MxNxK")
                .doesNotContain("Exception");
    }

    @Test
    void otherUsageErrorsExitWith2() {
        for (String[] args : List.of(
                new String[] {"bench", "gemm", "--dtypes", "fp64"},
                new String[] {"bench", "gemm", "--layout", "XY"},
                new String[] {"bench", "gemm", "--runs", "0"},
                new String[] {"bench", "gemm", "--threads", "0"},
                new String[] {"bench", "gemm", "--warmup-ms", "-1"},
                new String[] {"bench", "gemm", "--sizs", "32"},
                new String[] {"bench"},
                new String[] {},
                new String[] {"frobnicate"})) {
            Cli.Result r = Cli.run(args);
            assertThat(r.exitCode()).as("%s", String.join(" ", args)).isEqualTo(2);
            assertThat(r.errLines()).as("%s", String.join(" ", args)).singleElement().asString()
                    .startsWith("accel4j: error: ");
        }
    }

    @Test
    void helpExitsWith0() {
        Cli.Result r = Cli.run("bench", "gemm", "--help");

        assertThat(r.exitCode()).isZero();
        assertThat(r.out()).contains("--sizes", "--dtypes", "--layout", "--threads", "--naive-max");
    }

    /** The table's rows for one shape, split into cells. */
    private static List<String[]> rows(Cli.Result r, String shape) {
        return r.outLines().stream().filter(l -> l.startsWith(shape + " ")).map(l -> l.trim().split("\\s+")).toList();
    }
}
