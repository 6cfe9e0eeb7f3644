package io.accel4j.cuda.bindings;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cuda.CudaLibraries;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link cublasLt_h} against {@code cublasLt.h} (see {@link HeaderCheck}: prototypes, every constant, typedef sizes
 * and the struct offsets of {@code cublasLtMatmulHeuristicResult_t}), found in the CUDA include folders,
 * {@code /usr/include}, {@code /usr/local/include} or a Python environment's {@code nvidia/cublas/include}; skipped
 * with the reason elsewhere. Without the header, the Java side and the generated source's shape are still checked.
 */
class CublasLtHeaderCheckTest {

    @TempDir
    Path tmp;

    @Test
    void everyHolderAgreesWithItsPublicMethod() throws Exception {
        List<HeaderCheck.Function> functions = HeaderCheck.functions(cublasLt_h.class);
        assertThat(functions).extracting(HeaderCheck.Function::name).contains("cublasLtCreate", "cublasLtMatmul",
                "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatrixLayoutCreate", "cublasLtGetStatusString",
                "cublasLtGetVersion").doesNotHaveDuplicates();
        for (HeaderCheck.Function f : functions) {
            HeaderCheck.checkJavaSide(cublasLt_h.class, f);
        }
    }

    /** The heuristic result as the 12.6 header lays it out (the compiled check repeats this against the header). */
    @Test
    void heuristicResultLayout() {
        var r = cublasLt_h.cublasLtMatmulHeuristicResult_t;
        assertThat(cublasLt_h.cublasLtMatmulAlgo_t.byteSize()).isEqualTo(64);
        assertThat(r.byteOffset(groupElement("algo"))).isZero();
        assertThat(r.byteOffset(groupElement("workspaceSize"))).isEqualTo(64);
        assertThat(r.byteOffset(groupElement("state"))).isEqualTo(72);
        assertThat(r.byteOffset(groupElement("wavesCount"))).isEqualTo(76);
        assertThat(r.byteOffset(groupElement("reserved"))).isEqualTo(80);
        assertThat(r.byteSize()).isEqualTo(96);
        assertThat(r.byteAlignment()).isEqualTo(8);
    }

    @Test
    void generatedSourceShape() throws Exception {
        String source = HeaderCheck.source("cublasLt.h", cublasLt_h.class, HeaderCheck.functions(cublasLt_h.class));
        assertThat(source)
                .contains("cublasStatus_t (*const p_cublasLtMatmul)(cublasLtHandle_t lightHandle,")
                .contains("size_t (*const p_cublasLtGetVersion)(void) = cublasLtGetVersion;")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER == 21,")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER == 17,")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER == 18,")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER == 20,")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE == 26,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_BIAS == 4,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_GELU_AUX == 160,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_DGELU == 192,")
                .contains("_Static_assert(CUBLASLT_MATMUL_DESC_FAST_ACCUM == 25,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_GELU_AUX_BIAS == 164,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_DGELU_BGRAD == 208,")
                .contains("_Static_assert(CUBLASLT_EPILOGUE_BGRADB == 512,")
                .contains("_Static_assert(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES == 1,")
                .contains("_Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96,")
                .contains("_Static_assert(offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) == 64,")
                .contains("_Static_assert(offsetof(cublasLtMatmulHeuristicResult_t, wavesCount) == 76,")
                .contains("_Static_assert(offsetof(cublasLtMatmulHeuristicResult_t, reserved) == 80,");
    }

    @Test
    void bindingsCompileAgainstCublasLtH() throws Exception {
        Path gcc = CudaHeaderCheckTest.gcc();
        Path cudaInclude = CudaHeaderCheckTest.include();
        List<Path> extra = new ArrayList<>(List.of(Path.of("/usr/include"), Path.of("/usr/local/include")));
        for (Path lib : CudaLibraries.defaultFolders(Map.copyOf(System.getenv()))) {
            if (lib.endsWith(Path.of("cublas", "lib"))) {
                extra.add(lib.resolveSibling("include"));
            }
        }
        Optional<Path> ltInclude = HeaderCheck.includeDir("cublasLt.h", extra);
        assumeTrue(ltInclude.isPresent(), "cublasLt.h not found (CUDA include folders, /usr/include,"
                + " /usr/local/include, site-packages nvidia/cublas/include): the cuBLASLt header check needs it");
        String source = HeaderCheck.source("cublasLt.h", cublasLt_h.class, HeaderCheck.functions(cublasLt_h.class));
        Path file = Files.writeString(tmp.resolve("cublasLt_h_check.c"), source);

        HeaderCheck.Compiled result = HeaderCheck.compile(gcc.toString(),
                List.of(ltInclude.get(), cudaInclude), file);

        assertThat(result.exitCode()).as("gcc on %s:%n%s%n--- source ---%n%s", file, result.output(), source).isZero();
    }
}
