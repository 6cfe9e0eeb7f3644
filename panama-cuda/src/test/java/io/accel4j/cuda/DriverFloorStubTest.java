package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 18, item 1: the driver floor is what the PTX and the bound functions need (12.0), not 12.8; checked by
 * probing the stub driver at several reported versions.
 */
class DriverFloorStubTest {

    @BeforeEach
    void stub() {
        StubDriver.assume();
        StubDriver.reset();
    }

    @AfterEach
    void reset() {
        StubDriver.reset();
    }

    private static CudaProbe probeAt(int version) {
        StubDriver.driverVersion(version);
        return Cuda.probe(CudaLibraries.driver(), Cuda.REQUIRED_DRIVER_VERSION);
    }

    @Test
    void r550AndR560DriversAreAccepted() {
        assertThat(probeAt(12040)).isInstanceOf(CudaProbe.Ready.class); // R550
        assertThat(probeAt(12060)).isInstanceOf(CudaProbe.Ready.class); // R560
        assertThat(probeAt(12000)).isInstanceOf(CudaProbe.Ready.class);
        assertThat(((CudaProbe.Ready) probeAt(12020)).driverVersion()).isEqualTo(12020);
    }

    @Test
    void olderThan12IsRefusedSayingWhatItNeeds() {
        CudaProbe probe = probeAt(11080);
        assertThat(probe).isEqualTo(new CudaProbe.DriverTooOld(11080, 12000));
        assertThat(probe.describe()).isEqualTo("driver too old: CUDA 11.8, needs 12.0 or newer (update the NVIDIA driver)");
    }

    @Test
    void theFloorMatchesThePtxIsa() {
        assertThat(Cuda.REQUIRED_DRIVER_VERSION).isEqualTo(12000);
        assertThat(Cuda.PTX_ISA).isEqualTo("8.0");
    }
}
