package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The GPU tests' PTX, assembled by the toolkit's ptxas (no GPU needed): the good one passes, the broken one not. */
class TestPtxTest {

    @TempDir
    Path tmp;

    @Test
    void ptxAssemblesAndTheBrokenOneDoesNot() throws Exception {
        Path ptxas = Path.of("/usr/local/cuda/bin/ptxas");
        String home = System.getenv("CUDA_HOME");
        if (home != null && Files.isExecutable(Path.of(home, "bin", "ptxas"))) {
            ptxas = Path.of(home, "bin", "ptxas");
        }
        assumeTrue(Files.isExecutable(ptxas), "ptxas not found (CUDA_HOME/bin, /usr/local/cuda/bin)");
        assertThat(assemble(ptxas, TestPtx.axpy())).isEqualTo("");
        assertThat(assemble(ptxas, TestPtx.broken())).contains("Unknown symbol '%f9'");
    }

    private String assemble(Path ptxas, String ptx) throws Exception {
        Path file = Files.writeString(tmp.resolve("k.ptx"), ptx);
        Process p = new ProcessBuilder(ptxas.toString(), "-arch=sm_75", file.toString(), "-o",
                tmp.resolve("k.cubin").toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return p.exitValue() == 0 ? out.strip() : "exit " + p.exitValue() + ": " + out;
    }
}
