package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.mpi.MpiLibrary;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Open MPI backend under a real {@code mpirun -np 2}: {@link MpiSmokeMain} checks every collective on each rank.
 * Skipped (with the reason) when {@code mpirun} or {@code libmpi.so.40} is absent; {@code scripts/install-openmpi.sh}
 * installs both.
 */
class MpiCommunicatorTest {

    static String mpirun() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            Path p = Path.of(dir, "mpirun");
            if (Files.isExecutable(p)) {
                return p.toString();
            }
        }
        return null;
    }

    @Test
    void twoProcessesAgreeOnEveryCollective() throws Exception {
        String mpirun = mpirun();
        Assumptions.assumeTrue(mpirun != null, "mpirun not on PATH: run scripts/install-openmpi.sh");
        Assumptions.assumeTrue(MpiLibrary.available(), MpiLibrary::unavailableReason);

        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                "--mca", "btl_vader_single_copy_mechanism", "none",
                java, "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-cp", cp, MpiSmokeMain.class.getName(), "100003"));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("OMPI_MCA_rmaps_base_oversubscribe", "1");
        Process p = pb.start();
        byte[] out;
        boolean done = p.waitFor(90, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly();
        }
        out = p.getInputStream().readAllBytes();
        String text = new String(out, StandardCharsets.UTF_8);
        assertThat(done).as("mpirun finished within 90 s; output:%n%s", text).isTrue();
        assertThat(p.exitValue()).as("mpirun's exit code; output:%n%s", text).isZero();
        assertThat(text).contains("OK rank 0 of 2").contains("OK rank 1 of 2");
    }
}
