package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class CudaProbeTest {

    @Test
    void aSearchThatFoundNothingIsDriverNotFound() {
        CudaLibraries.Search none = new CudaLibraries.Search("libcuda.so.1", null, null, List.of("a", "b/libcuda.so.1"));

        CudaProbe probe = Cuda.probe(none, Cuda.REQUIRED_DRIVER_VERSION);

        assertThat(probe).isEqualTo(new CudaProbe.DriverNotFound(List.of("a", "b/libcuda.so.1")));
        assertThat(probe.describe()).isEqualTo("driver not found (searched: a, b/libcuda.so.1)");
    }

    @Test
    void descriptions() {
        assertThat(new CudaProbe.DriverTooOld(11080, 12000).describe())
                .isEqualTo("driver too old: CUDA 11.8, needs 12.0 or newer (update the NVIDIA driver)");
        assertThat(new CudaProbe.NoDevice(13000, "cuInit: CUDA_ERROR_NO_DEVICE").describe())
                .isEqualTo("no CUDA device (driver 13.0: cuInit: CUDA_ERROR_NO_DEVICE)");
        assertThat(new CudaProbe.Ready("NVIDIA H200", 90, 132, 150L << 30, 13000, 1, "x").describe())
                .isEqualTo("NVIDIA H200, compute capability 9.0, 132 SMs, 150.0 GiB, driver CUDA 13.0");
        assertThat(new CudaProbe.Ready("A", 80, 108, 1L << 30, 12080, 4, "x").describe())
                .endsWith(" (4 devices, using 0)");
        assertThat(new CudaProbe.Failed("stub").ready()).isFalse();
        assertThat(Cuda.versionString(12080)).isEqualTo("12.8");
    }
}
