package io.accel4j.cuda.bindings;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code panama-cuda/jextract/regenerate.sh} includes exactly the functions the binding classes bind (issue 18: it
 * had fallen behind them: no cuBLASLt, no {@code cuFuncSetAttribute}, {@code cuTensorMapEncodeTiled},
 * {@code cuStreamWaitEvent}, {@code cuEventQuery}, {@code ncclCommInitRankConfig}, {@code ncclReduce}). Runs its
 * {@code --list} mode (no jextract needed); skipped where bash is missing.
 */
class RegenerateScriptTest {

    private static final Path SCRIPT = Path.of("jextract/regenerate.sh");

    @Test
    void listsEveryBoundFunctionOfEveryHeader() throws Exception {
        assumeTrue(HeaderCheck.onPath("bash").isPresent(), "bash not on PATH");
        assertThat(SCRIPT).exists();
        Process p = new ProcessBuilder("bash", SCRIPT.toString(), "--list").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        Map<String, List<String>> listed = new HashMap<>();
        for (String line : out.lines().toList()) {
            int colon = line.indexOf(':');
            listed.put(line.substring(0, colon), Arrays.asList(line.substring(colon + 1).strip().split("\\s+")));
        }
        Map<String, Class<?>> headers = Map.of("cuda", cuda_h.class, "cublas", cublas_api_h.class,
                "cublaslt", cublasLt_h.class, "nccl", nccl_h.class);
        for (var e : headers.entrySet()) {
            List<String> bound = HeaderCheck.functions(e.getValue()).stream().filter(f -> f.declaredAs() == null)
                    .map(HeaderCheck.Function::name).toList();
            assertThat(listed.get(e.getKey())).as("%s functions in regenerate.sh", e.getKey())
                    .containsExactlyInAnyOrderElementsOf(bound);
        }
        assertThat(listed.get("cuda")).contains("cuFuncSetAttribute", "cuTensorMapEncodeTiled", "cuStreamWaitEvent",
                "cuEventQuery").doesNotContain("cuEventElapsedTime");
        assertThat(listed.get("nccl")).contains("ncclCommInitRankConfig", "ncclReduce");
        assertThat(Files.readString(SCRIPT)).contains("cublasLt.h");
    }
}
