package io.accel4j.cuda.bindings;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link cuda_h} against the CUDA toolkit's {@code cuda.h}, compiled by gcc (see {@link HeaderCheck}). Needs gcc
 * and {@code cuda.h} (from {@code CUDA_HOME}, {@code CUDA_PATH}, nvcc's folder or {@code /usr/local/cuda}), not a
 * GPU; skipped with the reason when either is missing.
 */
class CudaHeaderCheckTest {

    @TempDir
    Path tmp;

    @Test
    void everyHolderAgreesWithItsPublicMethod() throws Exception {
        List<HeaderCheck.Function> functions = HeaderCheck.functions(cuda_h.class);
        assertThat(functions).hasSizeGreaterThanOrEqualTo(40);
        assertThat(functions).extracting(HeaderCheck.Function::name)
                .contains("cuMemAlloc_v2", "cuMemFree_v2", "cuEventElapsedTime_v2", "cuDevicePrimaryCtxRelease_v2",
                        "cuLaunchKernel", "cuModuleLoadDataEx")
                .doesNotHaveDuplicates();
        for (HeaderCheck.Function f : functions) {
            HeaderCheck.checkJavaSide(cuda_h.class, f);
        }
    }

    @Test
    void bindingsCompileAgainstCudaH() throws Exception {
        Path gcc = gcc();
        Path include = include();
        String source = HeaderCheck.source("cuda.h", cuda_h.class, HeaderCheck.functions(cuda_h.class));
        Path file = Files.writeString(tmp.resolve("cuda_h_check.c"), source);

        HeaderCheck.Compiled result = HeaderCheck.compile(gcc.toString(), List.of(include), file);

        assertThat(result.exitCode()).as("gcc on %s (against %s):%n%s%n--- source ---%n%s", file, include,
                result.output(), source).isZero();
        assertThat(source).contains("CUresult (*const p_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytesize)"
                + " = cuMemAlloc_v2;");
    }

    /** The check is strict: a wrong parameter type, an unversioned name or a wrong constant fails to compile. */
    @Test
    void theCheckRejectsWrongBindings() throws Exception {
        Path gcc = gcc();
        Path include = include();
        for (String wrong : List.of(
                "CUresult (*const p)(CUdeviceptr *dptr, unsigned int bytesize) = cuMemAlloc_v2;",
                "CUresult (*const p)(CUdeviceptr dptr) = cuMemFree_v2;\n#ifdef cuMemFree\n#error macro\n#endif",
                "CUresult (*const p)(CUevent hEvent, CUstream hStream) = cuEventRecord;\n"
                        + "_Static_assert(CU_JIT_ERROR_LOG_BUFFER == 4, \"x\");",
                "_Static_assert(__builtin_classify_type((CUstream)0) == 1, \"x\");")) {
            Path file = Files.writeString(tmp.resolve("wrong.c"), "#include <cuda.h>\n" + wrong + "\n");
            assertThat(HeaderCheck.compile(gcc.toString(), List.of(include), file).exitCode()).as(wrong).isNotZero();
        }
    }

    @Test
    void prototypesParse() {
        HeaderCheck.Prototype p = HeaderCheck.parse("CUresult cuGetErrorName(CUresult error, const char **pStr)");
        assertThat(p.returnType()).isEqualTo("CUresult");
        assertThat(p.name()).isEqualTo("cuGetErrorName");
        assertThat(p.parameterTypes()).containsExactly("CUresult", "const char **");
        assertThat(HeaderCheck.parse("CUresult cuCtxSynchronize(void)").parameterTypes()).isEmpty();
    }

    static Path gcc() {
        Optional<Path> gcc = HeaderCheck.onPath("gcc");
        assumeTrue(gcc.isPresent(), "gcc not on PATH: the header check needs a C compiler");
        return gcc.get();
    }

    static Path include() {
        Optional<Path> dir = HeaderCheck.includeDir("cuda.h", List.of());
        assumeTrue(dir.isPresent(), "cuda.h not found (CUDA_HOME, CUDA_PATH, nvcc's folder, /usr/local/cuda):"
                + " install the CUDA toolkit to run the header check");
        return dir.get();
    }
}
