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

    /**
     * {@code ncclConfig_t} is bound as 2.28 declares it; older headers lack its last members (they are checked only
     * against 2.28 or newer, where the size is a lower bound: later releases append members).
     */
    static final Map<String, String> VERSIONED = Map.of("ncclConfig_t", "NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)");

    /** The byte offsets of {@code ncclConfig_v22800}'s members, by hand from nccl.h 2.28 (x86-64 LP64). */
    private static final Map<String, Long> CONFIG_OFFSETS = Map.ofEntries(Map.entry("size", 0L),
            Map.entry("magic", 8L), Map.entry("version", 12L), Map.entry("blocking", 16L),
            Map.entry("cgaClusterSize", 20L), Map.entry("minCTAs", 24L), Map.entry("maxCTAs", 28L),
            Map.entry("netName", 32L), Map.entry("splitShare", 40L), Map.entry("trafficClass", 44L),
            Map.entry("commName", 48L), Map.entry("collnetEnable", 56L), Map.entry("CTAPolicy", 60L),
            Map.entry("shrinkShare", 64L), Map.entry("nvlsCTAs", 68L), Map.entry("nChannelsPerNetPeer", 72L),
            Map.entry("nvlinkCentricSched", 76L));

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
        assertThat(functions).extracting(HeaderCheck.Function::name).contains("ncclCommInitRankConfig", "ncclGetVersion",
                "ncclGetUniqueId", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast", "ncclSend", "ncclRecv",
                "ncclGroupStart", "ncclCommAbort", "ncclCommDestroy", "ncclCommGetAsyncError");
    }

    @Test
    void configLayoutIsNccl228s() {
        assertThat(nccl_h.ncclConfig_t.byteSize()).isEqualTo(80);
        assertThat(nccl_h.ncclConfig_t.memberLayouts()).hasSize(CONFIG_OFFSETS.size());
        CONFIG_OFFSETS.forEach((name, offset) -> assertThat(nccl_h.ncclConfig_t.byteOffset(
                java.lang.foreign.MemoryLayout.PathElement.groupElement(name))).as(name).isEqualTo(offset));
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
        String source = HeaderCheck.source("nccl.h", nccl_h.class, HeaderCheck.functions(nccl_h.class),
                VERSIONED);
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
        String versioned = HeaderCheck.source("nccl.h", nccl_h.class, HeaderCheck.functions(nccl_h.class), VERSIONED);
        assertThat(versioned)
                .contains("ncclResult_t (*const p_ncclCommInitRankConfig)(ncclComm_t *comm, int nranks,"
                        + " ncclUniqueId commId, int rank, ncclConfig_t *config) = ncclCommInitRankConfig;")
                .contains("#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)\n_Static_assert(sizeof(ncclConfig_t) >= 80,")
                .contains("_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76,")
                .contains("_Static_assert(NCCL_CONFIG_UNDEF_INT == -2147483648,");
    }
}
