package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.StubDriver;
import io.accel4j.cuda.bindings.cuda_h;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link ModuleCheck} (the GPU check's modules.tsv) against the stub driver: a row per module, failures named. */
class ModuleCheckStubTest {

    private static CudaContext ctx;

    @TempDir
    Path tmp;

    @BeforeAll
    static void open() {
        StubDriver.assume();
        ctx = Cuda.open(0);
    }

    @AfterAll
    static void close() {
        StubDriver.reset();
        if (ctx != null) {
            ctx.close();
        }
    }

    @BeforeEach
    void reset() {
        StubDriver.reset();
    }

    @Test
    void everyModuleLoadsAndLaunchesOnce() throws Exception {
        Path tsv = tmp.resolve("modules.tsv");
        StringWriter out = new StringWriter();
        int rc = ModuleCheck.run(ctx, tsv, new PrintWriter(out, true));
        List<String> lines = Files.readAllLines(tsv);
        assertThat(rc).as(out.toString()).isZero();
        assertThat(lines.getFirst()).isEqualTo(ModuleCheck.HEADER);
        assertThat(lines.subList(1, lines.size())).extracting(l -> l.split("\t")[0])
                .containsExactlyElementsOf(Kernels.MODULES);
        for (String row : lines.subList(1, lines.size())) {
            String[] f = row.split("\t", -1);
            assertThat(f).as(row).hasSize(10);
            assertThat(f[1]).as(row).isEqualTo("sm_90a");
            assertThat(f[2]).as("the stub refuses cubins: %s", row).isEqualTo("ptx (cubin: CUDA_ERROR_INVALID_IMAGE)");
            assertThat(f[3]).as(row).isEqualTo("ok");
            assertThat(f[7]).as(row).isEqualTo("ok");
        }
    }

    @Test
    void aModuleThatDoesNotJitIsARowAndExit1() throws Exception {
        StubDriver.fail("cuModuleLoadDataEx", ".entry gelu_forward", cuda_h.CUDA_ERROR_INVALID_PTX, -1);
        Path tsv = tmp.resolve("modules.tsv");
        int rc = ModuleCheck.run(ctx, tsv, new PrintWriter(new StringWriter(), true));
        assertThat(rc).isEqualTo(1);
        String gelu = Files.readAllLines(tsv).stream().filter(l -> l.startsWith("gelu\t")).findFirst().orElseThrow();
        assertThat(gelu).startsWith("gelu\tsm_90a\tptx (cubin: CUDA_ERROR_INVALID_IMAGE)\tCUDA_ERROR_INVALID_PTX\t218\t")
                .contains("\tskipped\t0\t")
                .contains("stub: injected failure 218");
        assertThat(Files.readAllLines(tsv)).filteredOn(l -> l.startsWith("layernorm\t")).singleElement()
                .asString().contains("\tok\t");
    }

    @Test
    void registersAreReadFromTheVerboseJitLog() {
        String log = "ptxas info    : Compiling entry function 'gelu_forward' for 'sm_90a'\n"
                + "ptxas info    : Function properties for gelu_forward\n"
                + "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                + "ptxas info    : Used 12 registers, 380 bytes cmem[0]\n"
                + "ptxas info    : Function properties for gelu_backward\n"
                + "ptxas info    : Used 16 registers, 384 bytes cmem[0]\n";
        assertThat(ModuleCheck.registers(log)).isEqualTo("gelu_forward:12,gelu_backward:16");
        assertThat(ModuleCheck.registers("")).isEqualTo("-");
    }
}
