package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.accel4j.cuda.bindings.cublas_api_h;
import io.accel4j.cuda.bindings.cuda_h;
import io.accel4j.cuda.bindings.nccl_h;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The behaviour without a driver (CI: the CUDA toolkit, no {@code libcuda.so.1}): nothing fails when classes load,
 * {@link Cuda#probe()} says where it looked, every call says the same. Skipped where a driver is installed. Also run
 * by Surefire's stub-driver execution, with {@code ACCEL4J_CUDA_LIB_PATH} set (as on a lent GPU machine): the
 * messages then start with that place, so the tests fix what is searched, not that it comes first.
 */
class CudaNoDriverTest {

    private static void assumeNoDriver() {
        assumeFalse(CudaLibraries.driver().found(),
                "a CUDA driver is installed here (" + CudaLibraries.driver().loadedFrom() + ")");
    }

    @Test
    void classesLoadWithoutTheDriver() {
        ClassLoader loader = getClass().getClassLoader();
        for (String name : List.of("io.accel4j.cuda.bindings.cuda_h", "io.accel4j.cuda.Cuda",
                "io.accel4j.cuda.CudaException", "io.accel4j.cuda.DeviceBuffer", "io.accel4j.cuda.CudaModule",
                "io.accel4j.cuda.CudaKernel", "io.accel4j.cuda.CudaContext", "io.accel4j.cuda.bindings.nccl_h",
                "io.accel4j.cuda.bindings.cublas_api_h", "io.accel4j.cuda.NcclComm", "io.accel4j.cuda.CublasHandle")) {
            assertThatCode(() -> Class.forName(name, true, loader)).as(name).doesNotThrowAnyException();
        }
    }

    @Test
    void probeReportsDriverNotFoundWithTheSearchedPlaces() {
        assumeNoDriver();
        CudaProbe probe = Cuda.probe();

        assertThat(probe).isInstanceOf(CudaProbe.DriverNotFound.class);
        assertThat(probe.ready()).isFalse();
        List<String> searched = ((CudaProbe.DriverNotFound) probe).searched();
        assertThat(searched).contains("dynamic loader (libcuda.so.1)", "/usr/local/cuda/lib64/libcuda.so.1");
        // ACCEL4J_CUDA_LIB_PATH, where set, is searched first: only the order of the places after it is fixed
        assertThat(probe.describe()).startsWith("driver not found (searched: ")
                .contains("dynamic loader (libcuda.so.1), ").contains("/usr/local/cuda/lib64/libcuda.so.1");
        assertThat(Cuda.probe()).as("computed once").isSameAs(probe);
    }

    @Test
    void everyCallThrowsDriverNotFound() {
        assumeNoDriver();
        assertThatThrownBy(() -> cuda_h.cuInit(0))
                .isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cuInit: libcuda.so.1 not found (searched: ")
                .hasMessageContaining("dynamic loader (libcuda.so.1)")
                .satisfies(e -> assertThat(((CudaException) e).status()).isEqualTo(CudaException.NOT_FOUND));
        // a second call fails the same way (no ExceptionInInitializerError / NoClassDefFoundError)
        assertThatThrownBy(() -> cuda_h.cuMemAlloc_v2(MemorySegment.NULL, 16))
                .isInstanceOf(CudaException.class).hasMessageContaining("cuMemAlloc_v2: libcuda.so.1 not found");
        assertThatThrownBy(() -> cuda_h.cuMemAlloc_v2(MemorySegment.NULL, 16))
                .isInstanceOf(CudaException.class);
        assertThatThrownBy(() -> Cuda.open(0)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("CUDA is not usable: driver not found");
    }

    @Test
    void cublasAndNcclCallsSayWhereTheyLooked() {
        assumeFalse(CudaLibraries.nccl().found(), "NCCL is installed here");
        assertThatThrownBy(() -> nccl_h.ncclGetVersion(MemorySegment.NULL)).isInstanceOf(CudaException.class)
                .hasMessageStartingWith("ncclGetVersion: libnccl.so.2 not found (searched: ")
                .hasMessageContaining("dynamic loader (libnccl.so.2), dynamic loader (libnccl.so), ");
        assumeFalse(CudaLibraries.cublas().found(), "cuBLAS is installed here");
        assertThatThrownBy(() -> cublas_api_h.cublasCreate_v2(MemorySegment.NULL)).isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cublasCreate_v2: libcublas.so.13 not found (searched: ")
                .hasMessageContaining("/usr/local/cuda/lib64/libcublas.so.12");
    }

    @Test
    void checkPassesSuccessAndDescribesFailuresEvenWithoutTheDriver() {
        assertThatCode(() -> CudaException.check("cuInit", cuda_h.CUDA_SUCCESS)).doesNotThrowAnyException();
        assumeNoDriver();
        assertThatThrownBy(() -> CudaException.check("cuMemAlloc_v2", cuda_h.CUDA_ERROR_OUT_OF_MEMORY))
                .isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cuMemAlloc_v2 failed: CUresult 2 (2): unknown error")
                .satisfies(e -> {
                    CudaException c = (CudaException) e;
                    assertThat(c.call()).isEqualTo("cuMemAlloc_v2");
                    assertThat(c.status()).isEqualTo(2);
                    assertThat(c.errorName()).isEqualTo("CUresult 2");
                });
    }
}
