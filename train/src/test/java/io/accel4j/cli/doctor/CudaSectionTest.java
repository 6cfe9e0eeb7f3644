package io.accel4j.cli.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaProbe;
import java.util.List;
import org.junit.jupiter.api.Test;

class CudaSectionTest {

    @Test
    void driverNotFoundListsEveryPlaceSearched() {
        CudaSection s = new CudaSection(() -> new CudaProbe.DriverNotFound(List.of("dynamic loader (libcuda.so.1)",
                "/usr/local/cuda/lib64/libcuda.so.1")));

        assertThat(s.title()).isEqualTo("CUDA");
        assertThat(s.lines()).containsExactly(
                new DoctorSection.Line("status", "driver not found (libcuda.so.1) — CPU only"),
                new DoctorSection.Line("searched", "dynamic loader (libcuda.so.1)"),
                new DoctorSection.Line("", "/usr/local/cuda/lib64/libcuda.so.1"),
                new DoctorSection.Line("hint",
                        "install the NVIDIA driver, or set ACCEL4J_CUDA_LIB_PATH to libcuda.so.1 or its folder"));
    }

    @Test
    void readyShowsTheDevice() {
        CudaSection s = new CudaSection(() -> new CudaProbe.Ready("NVIDIA H200", 90, 132, 150L << 30, 13000, 2,
                "dynamic loader (libcuda.so.1)"), () -> List.of(new DoctorSection.Line("cuBLASLt", "x (version 1)")));

        assertThat(s.lines()).containsExactly(
                new DoctorSection.Line("device", "NVIDIA H200 (device 0 of 2)"),
                new DoctorSection.Line("compute capability", "9.0"),
                new DoctorSection.Line("multiprocessors", "132"),
                new DoctorSection.Line("device memory", "150.0 GiB"),
                new DoctorSection.Line("driver", "CUDA 13.0 (dynamic loader (libcuda.so.1))"),
                new DoctorSection.Line("PTX", "ISA 8.0, needs driver CUDA 12.0 or newer"),
                new DoctorSection.Line("bf16 attention", "forward wgmma (sm_90a), backward wmma"),
                new DoctorSection.Line("cuBLASLt", "x (version 1)"));
        assertThat(CudaSection.attention(89)).isEqualTo("forward and backward wmma");
        assertThat(CudaSection.attention(100)).isEqualTo("forward and backward wmma");
    }

    @Test
    void otherOutcomesAreOneStatusLine() {
        assertThat(new CudaSection(() -> new CudaProbe.DriverTooOld(11080, 12000)).lines()).containsExactly(
                new DoctorSection.Line("status",
                        "driver too old: CUDA 11.8, needs 12.0 or newer (update the NVIDIA driver)"),
                new DoctorSection.Line("PTX", "ISA 8.0, needs driver CUDA 12.0 or newer"));
    }

    @Test
    void theReportHasACudaSectionThatMatchesTheProbe() {
        assertThat(DoctorCommand.sections()).last().satisfies(s -> {
            assertThat(s.title()).isEqualTo("CUDA");
            String first = s.lines().getFirst().value();
            if (Cuda.probe() instanceof CudaProbe.Ready r) {
                assertThat(first).startsWith(r.deviceName());
            } else if (Cuda.probe() instanceof CudaProbe.DriverNotFound) {
                assertThat(first).startsWith("driver not found");
            }
        });
    }
}
