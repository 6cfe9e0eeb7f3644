package io.accel4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code accel4j bench async}: a short run prints a row per strategy (DDP's workers take the same steps) and the
 * ratios to DDP; bad flags are usage errors naming them.
 */
class AsyncBenchCommandTest {

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void aShortRunPrintsEveryStrategyAndItsRatioToDdp() {
        Result r = run("bench", "async", "--seconds", "0.5", "--warmup", "1", "--staleness", "1", "--batch", "1", "--seq", "16");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("GPT-2 tiny (L=2, NH=4, C=64), 2 workers x 1 x 16 tokens", "(+50 %)",
                "async S=1 vs sync: ");
        Matcher ddp = Pattern.compile("sync \\(DDP\\) +\\[(\\d+), (\\d+)]").matcher(r.out());
        assertThat(ddp.find()).as(r.out()).isTrue();
        assertThat(ddp.group(1)).as("DDP's workers step together").isEqualTo(ddp.group(2));
        assertThat(r.out()).containsPattern("async S=1 +\\[\\d+, \\d+] +\\d+ +\\d+\\.\\d{4}");
    }

    @Test
    void badFlagsAreUsageErrors() {
        Result r = run("bench", "async", "--workers", "1");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("--workers must be >= 2", "got --workers 1");
        r = run("bench", "async", "--staleness", "-1");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("every --staleness >= 0", "--staleness [-1]");
    }
}
