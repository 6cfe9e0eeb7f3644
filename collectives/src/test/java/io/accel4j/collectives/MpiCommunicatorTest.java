package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.Mpirun;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Open MPI backend under a real {@code mpirun -np 2}: {@link MpiSmokeMain} checks every collective on each rank.
 * Skipped (with the reason) when {@code mpirun} or {@code libmpi.so.40} is absent; {@code scripts/install-openmpi.sh}
 * installs both.
 */
class MpiCommunicatorTest {

    /** {@code mpirun} on PATH with a loadable {@code libmpi}, or the test is skipped saying which is missing. */
    static Path mpirunOrSkip() {
        Path mpirun = Mpirun.find().orElse(null);
        Assumptions.assumeTrue(mpirun != null, "mpirun not on PATH: run scripts/install-openmpi.sh");
        Assumptions.assumeTrue(MpiLibrary.available(), MpiLibrary::unavailableReason);
        return mpirun;
    }

    /** This test JVM's class path, which holds the test mains. */
    static String classpath() {
        return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    }

    @Test
    void twoProcessesAgreeOnEveryCollective() throws Exception {
        List<String> cmd = Mpirun.javaCommand(mpirunOrSkip(), 2, List.of(), classpath(),
                MpiSmokeMain.class.getName(), List.of("100003"));
        Mpirun.Result r = Mpirun.run(cmd, Path.of("."), Duration.ofSeconds(90));
        assertThat(r.finished()).as("mpirun finished within 90 s; output:%n%s", r.output()).isTrue();
        assertThat(r.exitCode()).as("mpirun's exit code; output:%n%s", r.output()).isZero();
        assertThat(r.output()).contains("OK rank 0 of 2").contains("OK rank 1 of 2");
    }

    @Test
    void splitGroupsOfThreeProcessesAgree() throws Exception {
        List<String> cmd = Mpirun.javaCommand(mpirunOrSkip(), 3, List.of(), classpath(),
                MpiSplitMain.class.getName(), List.of());
        Mpirun.Result r = Mpirun.run(cmd, Path.of("."), Duration.ofSeconds(120));
        assertThat(r.finished()).as("mpirun finished within 120 s; output:%n%s", r.output()).isTrue();
        assertThat(r.exitCode()).as("mpirun's exit code; output:%n%s", r.output()).isZero();
        for (int i = 0; i < 3; i++) { // groups {2, 0} and {1}
            assertThat(r.output()).contains("SPLIT OK rank " + i + " of 3");
        }
    }
}
