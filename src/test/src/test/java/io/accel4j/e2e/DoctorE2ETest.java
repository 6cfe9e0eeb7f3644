package io.accel4j.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.util.List;
import org.junit.jupiter.api.Test;

class DoctorE2ETest {

    @Test
    void reportsTheVectorWidthAndTheThreadCount() {
        Cli.Result r = Cli.run("doctor");

        assertThat(r.exitCode()).as("exit code; stderr: %s", r.err()).isZero();
        assertThat(r.err()).isEmpty();
        assertThat(r.outLines()).contains("JVM", "CPU", "CPU kernels", "Memory");
        assertThat(r.out()).contains(Simd.describe());
        assertThat(r.outLines())
                .anyMatch(l -> l.matches("\\s+threads\\s+" + Parallel.defaultThreads() + " \\(.*"));
        assertThat(r.outLines()).anyMatch(l -> l.matches("\\s+java\\.home\\s+" + java.util.regex.Pattern.quote(
                System.getProperty("java.home"))));
    }

    @Test
    void valuesStartInOneColumn() {
        List<String> lines = Cli.run("doctor").outLines().stream().filter(l -> l.startsWith("  ")).toList();

        assertThat(lines).hasSizeGreaterThan(8);
        int column = valueColumn(lines.getFirst());
        assertThat(lines).allSatisfy(l -> assertThat(valueColumn(l)).as(l).isEqualTo(column));
    }

    /** Where the value starts: after the key and the run of (at least two) spaces. */
    private static int valueColumn(String line) {
        int i = 2;
        while (i < line.length() && !(line.charAt(i) == ' ' && line.charAt(i + 1) == ' ')) {
            i++;
        }
        while (i < line.length() && line.charAt(i) == ' ') {
            i++;
        }
        return i;
    }
}
