package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CudaLibrariesTest {

    private static final String NONE = "libaccel4j-does-not-exist.so.1";

    @TempDir
    Path tmp;

    @Test
    void notFoundListsEveryPlaceInOrder() throws Exception {
        Path folder = tmp.resolve("lib64");

        CudaLibraries.Search s = CudaLibraries.find(List.of(NONE),
                Map.of(CudaLibraries.PATH_ENV, tmp + ":" + tmp.resolve("missing.so")), List.of(folder));

        assertThat(s.found()).isFalse();
        assertThat(s.searched()).containsExactly(
                CudaLibraries.PATH_ENV + "=" + tmp.resolve(NONE),
                CudaLibraries.PATH_ENV + "=" + tmp.resolve("missing.so"),
                "dynamic loader (" + NONE + ")",
                folder.resolve(NONE).toString());
        assertThat(s.notFoundMessage()).startsWith(NONE + " not found (searched: " + CudaLibraries.PATH_ENV + "=");
    }

    @Test
    void findsALibraryInAFolderAndThroughTheEnvironment() throws Exception {
        Path real = Path.of("/usr/local/cuda/lib64/libcudart.so.13");
        assumeTrue(Files.isRegularFile(real), "no CUDA 13 toolkit runtime at " + real);
        // a name the dynamic loader cannot know, so that only the folder search can find it
        Path lib64 = Files.createDirectories(tmp.resolve("lib64"));
        String cudart = "libaccel4j-test-cudart.so";
        Files.createSymbolicLink(lib64.resolve(cudart), real);

        CudaLibraries.Search inFolder = CudaLibraries.find(List.of(NONE, cudart), Map.of(), List.of(lib64));
        assertThat(inFolder.found()).isTrue();
        assertThat(inFolder.loadedFrom()).isEqualTo(lib64.resolve(cudart).toString());
        assertThat(inFolder.lookup().find("cudaGetDeviceCount")).isPresent();

        CudaLibraries.Search viaEnv = CudaLibraries.find(List.of(cudart),
                Map.of(CudaLibraries.PATH_ENV, lib64.toString()), List.of());
        assertThat(viaEnv.found()).isTrue();
        assertThat(viaEnv.searched()).containsExactly(CudaLibraries.PATH_ENV + "=" + lib64.resolve(cudart));
        Files.delete(lib64.resolve(cudart)); // JUnit warns about links that point outside its folder
    }

    @Test
    void defaultFoldersIncludeTheToolkitTheDistributionAndPythonWheels() throws Exception {
        Path venv = tmp.resolve("venv");
        Path cublas = Files.createDirectories(venv.resolve("lib/python3.12/site-packages/nvidia/cublas/lib"));
        Files.createDirectories(venv.resolve("lib/python3.12/site-packages/nvidia/nccl"));

        List<Path> folders = CudaLibraries.defaultFolders(
                Map.of("VIRTUAL_ENV", venv.toString(), "CUDA_HOME", "/opt/cuda"));

        assertThat(folders).startsWith(Path.of("/opt/cuda/lib64"), Path.of("/usr/local/cuda/lib64"));
        assertThat(folders).contains(Path.of("/usr/lib", CudaLibraries.multiarch()), cublas)
                .doesNotContain(venv.resolve("lib/python3.12/site-packages/nvidia/nccl/lib"))
                .noneMatch(p -> p.toString().contains("stubs"));
    }

    /** Issue 18, item 1: a CUDA 13 cuBLAS needs a 13.x driver; under a 12.x one the .so.12 names go first. */
    @Test
    void cublasTwelveIsPreferredUnderATwelveDriver() {
        assertThat(CudaLibraries.forDriver(CudaLibraries.CUBLAS, 12040))
                .containsExactly("libcublas.so.12", "libcublas.so.13", "libcublas.so");
        assertThat(CudaLibraries.forDriver(CudaLibraries.CUBLASLT, 12080))
                .containsExactly("libcublasLt.so.12", "libcublasLt.so.13", "libcublasLt.so");
        assertThat(CudaLibraries.forDriver(CudaLibraries.CUBLAS, 13000)).isEqualTo(CudaLibraries.CUBLAS);
        assertThat(CudaLibraries.forDriver(CudaLibraries.CUBLAS, 0)).as("no driver").isEqualTo(CudaLibraries.CUBLAS);
    }
}
