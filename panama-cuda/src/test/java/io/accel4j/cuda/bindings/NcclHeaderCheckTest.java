package io.accel4j.cuda.bindings;

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
 * {@link nccl_h} against {@code nccl.h} (see {@link HeaderCheck}), found in the CUDA include folders,
 * {@code /usr/include}, or a Python environment's {@code nvidia/nccl/include}; skipped with the reason elsewhere.
 */
class NcclHeaderCheckTest {

    @TempDir
    Path tmp;

    @Test
    void everyHolderAgreesWithItsPublicMethod() throws Exception {
        List<HeaderCheck.Function> functions = HeaderCheck.functions(nccl_h.class);
        assertThat(functions).extracting(HeaderCheck.Function::name).contains("ncclCommInitRank", "ncclAllReduce",
                "ncclGroupEnd", "ncclGetErrorString").doesNotHaveDuplicates();
        for (HeaderCheck.Function f : functions) {
            HeaderCheck.checkJavaSide(nccl_h.class, f);
        }
        assertThat(nccl_h.ncclUniqueId.byteSize()).isEqualTo(nccl_h.NCCL_UNIQUE_ID_BYTES);
    }

    @Test
    void bindingsCompileAgainstNcclH() throws Exception {
        Path gcc = CudaHeaderCheckTest.gcc();
        Path cudaInclude = CudaHeaderCheckTest.include();
        List<Path> extra = new ArrayList<>(List.of(Path.of("/usr/include"), Path.of("/usr/local/include")));
        for (Path lib : CudaLibraries.defaultFolders(Map.copyOf(System.getenv()))) {
            if (lib.endsWith(Path.of("nccl", "lib"))) {
                extra.add(lib.resolveSibling("include"));
            }
        }
        Optional<Path> ncclInclude = HeaderCheck.includeDir("nccl.h", extra);
        assumeTrue(ncclInclude.isPresent(), "nccl.h not found (CUDA include folders, /usr/include, /usr/local/include,"
                + " site-packages nvidia/nccl/include): the NCCL header check needs it");
        String source = HeaderCheck.source("nccl.h", nccl_h.class, HeaderCheck.functions(nccl_h.class));
        Path file = Files.writeString(tmp.resolve("nccl_h_check.c"), source);

        HeaderCheck.Compiled result = HeaderCheck.compile(gcc.toString(), List.of(ncclInclude.get(), cudaInclude), file);

        assertThat(result.exitCode()).as("gcc on %s:%n%s%n--- source ---%n%s", file, result.output(), source).isZero();
    }

    /** Without the header, the generated source still has the expected shape (so the skip hides nothing basic). */
    @Test
    void generatedSourceShape() throws Exception {
        String source = HeaderCheck.source("nccl.h", nccl_h.class, HeaderCheck.functions(nccl_h.class));
        assertThat(source)
                .contains("ncclResult_t (*const p_ncclCommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId commId,"
                        + " int rank) = ncclCommInitRank;")
                .contains("const char * (*const p_ncclGetErrorString)(ncclResult_t result) = ncclGetErrorString;")
                .contains("_Static_assert(sizeof(ncclUniqueId) == 128,")
                .contains("_Static_assert(ncclFloat8e5m2 == 11,");
    }
}
