package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.StubDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link CudaMemory#hostArena()} against the stub driver: the host buffers of an offloaded optimizer (master weights,
 * gradient landing buffer) are page-locked ({@code cuMemHostAlloc}, zeroed), a step's moves are one
 * {@code cuMemcpyDtoH} of the gradients into them and one {@code cuMemcpyHtoD} of the weights out of them, and closing
 * frees each buffer once ({@code cuMemFreeHost}). Skipped, saying why, where the stub could not be built or loaded.
 */
class PinnedHostArenaStubTest {

    private static CudaContext ctx;

    @BeforeAll
    static void open() {
        StubDriver.assume();
        ctx = Cuda.open(0);
    }

    @AfterAll
    static void close() {
        StubDriver.reset();
        if (ctx != null) {
            ctx.close();
        }
    }

    @Test
    void pinnedBuffersCarryAStepsCopiesAndAreFreedOnce() {
        StubDriver.reset();
        CudaMemory mem = new CudaMemory(ctx);
        int n = 37; // odd
        long allocs = StubDriver.calls("cuMemHostAlloc"), frees = StubDriver.calls("cuMemFreeHost");
        try (DeviceArena host = mem.hostArena(); DeviceArena dev = mem.arena()) {
            MemorySegment master = host.allocate(4L * n), grads = host.allocate(4L * n);
            assertThat(StubDriver.calls("cuMemHostAlloc")).isEqualTo(allocs + 2);
            for (int i = 0; i < n; i++) {
                assertThat(master.getAtIndex(ValueLayout.JAVA_FLOAT, i)).isZero();
                assertThat(grads.getAtIndex(ValueLayout.JAVA_FLOAT, i)).isZero();
            }
            MemorySegment dParams = dev.allocate(4L * n), dGrads = dev.allocate(4L * n);
            for (int i = 0; i < n; i++) {
                master.setAtIndex(ValueLayout.JAVA_FLOAT, i, 0.5f * i - 3);
            }
            mem.copyToDevice(master, dGrads); // stands for backward's gradients
            grads.fill((byte) 0xFF); // poisoned: the download must write every element
            long dtoh = StubDriver.calls("cuMemcpyDtoH_v2"), htod = StubDriver.calls("cuMemcpyHtoD_v2");
            mem.copyToHost(dGrads, grads); // gradients down
            mem.copyToDevice(master, dParams); // weights up
            assertThat(StubDriver.calls("cuMemcpyDtoH_v2")).isEqualTo(dtoh + 1);
            assertThat(StubDriver.calls("cuMemcpyHtoD_v2")).isEqualTo(htod + 1);
            for (int i = 0; i < n; i++) {
                assertThat(grads.getAtIndex(ValueLayout.JAVA_FLOAT, i)).isEqualTo(0.5f * i - 3);
            }
            host.close();
            host.close(); // exactly once
            assertThat(StubDriver.calls("cuMemFreeHost")).isEqualTo(frees + 2);
            assertThatThrownBy(() -> host.allocate(4)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
        }
    }
}
