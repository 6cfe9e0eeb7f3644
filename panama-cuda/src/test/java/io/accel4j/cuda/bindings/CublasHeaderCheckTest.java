package io.accel4j.cuda.bindings;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cuda.CudaLibraries;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link cublas_api_h} against {@code cublas_api.h} (see {@link HeaderCheck}), found in the CUDA include folders,
 * {@code /usr/include} or a Python environment's {@code nvidia/cublas/include}; skipped with the reason elsewhere.
 * The {@code cudaDataType} constants are checked against the toolkit's {@code library_types.h} in any case.
 */
class CublasHeaderCheckTest {

    @TempDir
    Path tmp;

    @Test
    void everyHolderAgreesWithItsPublicMethod() throws Exception {
        List<HeaderCheck.Function> functions = HeaderCheck.functions(cublas_api_h.class);
        assertThat(functions).extracting(HeaderCheck.Function::name).contains("cublasCreate_v2", "cublasGemmEx",
                "cublasGemmStridedBatchedEx", "cublasGetStatusString").doesNotHaveDuplicates();
        for (HeaderCheck.Function f : functions) {
            HeaderCheck.checkJavaSide(cublas_api_h.class, f);
        }
    }

    @Test
    void dataTypesMatchLibraryTypesH() throws Exception {
        Path gcc = CudaHeaderCheckTest.gcc();
        Path include = CudaHeaderCheckTest.include();
        StringBuilder c = new StringBuilder("#include <library_types.h>\n");
        for (Field f : cublas_api_h.class.getFields()) {
            if (f.getName().startsWith("CUDA_R_") && Modifier.isStatic(f.getModifiers())) {
                c.append("_Static_assert(").append(f.getName()).append(" == ").append(f.getInt(null))
                        .append(", \"").append(f.getName()).append("\");\n");
            }
        }
        c.append("_Static_assert(sizeof(cudaDataType) == ").append(cublas_api_h.cudaDataType.byteSize())
                .append(", \"cudaDataType\");\n");
        Path file = Files.writeString(tmp.resolve("library_types_check.c"), c);

        HeaderCheck.Compiled result = HeaderCheck.compile(gcc.toString(), List.of(include), file);

        assertThat(result.exitCode()).as("gcc:%n%s%n--- source ---%n%s", result.output(), c).isZero();
        assertThat(c.toString()).contains("CUDA_R_8F_E4M3 == 28", "CUDA_R_8F_E5M2 == 29", "CUDA_R_16BF == 14",
                "CUDA_R_16F == 2", "CUDA_R_32F == 0");
    }

    @Test
    void bindingsCompileAgainstCublasApiH() throws Exception {
        Path gcc = CudaHeaderCheckTest.gcc();
        Path cudaInclude = CudaHeaderCheckTest.include();
        List<Path> extra = new ArrayList<>(List.of(Path.of("/usr/include"), Path.of("/usr/local/include")));
        for (Path lib : CudaLibraries.defaultFolders(Map.copyOf(System.getenv()))) {
            if (lib.endsWith(Path.of("cublas", "lib"))) {
                extra.add(lib.resolveSibling("include"));
            }
        }
        Optional<Path> cublasInclude = HeaderCheck.includeDir("cublas_api.h", extra);
        assumeTrue(cublasInclude.isPresent(), "cublas_api.h not found (CUDA include folders, /usr/include,"
                + " /usr/local/include, site-packages nvidia/cublas/include): the cuBLAS header check needs it");
        String source = HeaderCheck.source("cublas_api.h", cublas_api_h.class,
                HeaderCheck.functions(cublas_api_h.class));
        Path file = Files.writeString(tmp.resolve("cublas_api_h_check.c"), source);

        HeaderCheck.Compiled result = HeaderCheck.compile(gcc.toString(),
                List.of(cublasInclude.get(), cudaInclude), file);

        assertThat(result.exitCode()).as("gcc on %s:%n%s%n--- source ---%n%s", file, result.output(), source).isZero();
    }
}
