package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** The parts of the owning classes that need no GPU: close-once, use-after-close, kernel argument packing. */
class OwnershipTest {

    private static final class Counted extends NativeResource {
        int releases;

        @Override
        String describe() {
            return "Counted(1)";
        }

        @Override
        void release() {
            releases++;
        }
    }

    @Test
    void releasesExactlyOnceAndRefusesUseAfterClose() {
        Counted c = new Counted();
        c.ensureOpen();
        c.close();
        c.close();
        assertThat(c.releases).isEqualTo(1);
        assertThat(c.isClosed()).isTrue();
        assertThat(c).hasToString("Counted(1) [closed]");
        assertThatThrownBy(c::ensureOpen).isInstanceOf(IllegalStateException.class)
                .hasMessage("Counted(1) is closed");
    }

    @Test
    void packsKernelArgumentsAsPointersToCopies() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment params = CudaKernel.pack(arena, 7, 1L << 40, 2.5f, -0.5);
            assertThat(params.byteSize()).isEqualTo(4 * ValueLayout.ADDRESS.byteSize());
            assertThat(arg(params, 0, 4).get(ValueLayout.JAVA_INT, 0)).isEqualTo(7);
            assertThat(arg(params, 1, 8).get(ValueLayout.JAVA_LONG, 0)).isEqualTo(1L << 40);
            assertThat(arg(params, 2, 4).get(ValueLayout.JAVA_FLOAT, 0)).isEqualTo(2.5f);
            assertThat(arg(params, 3, 8).get(ValueLayout.JAVA_DOUBLE, 0)).isEqualTo(-0.5);
            assertThat(CudaKernel.pack(arena).byteSize()).as("no arguments").isEqualTo(8);
            assertThatThrownBy(() -> CudaKernel.pack(arena, 1, "x")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel argument 1 has unsupported type java.lang.String");
            assertThatThrownBy(() -> CudaKernel.pack(arena, (Object) null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("kernel argument 0 is null");
        }
    }

    /** A CUtensorMap goes by value: the parameter points at a 128-byte aligned copy of its 128 bytes. */
    @Test
    void packsATensorMapByValue() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment bytes = arena.allocate(128, 128);
            for (int i = 0; i < 128; i++) {
                bytes.set(ValueLayout.JAVA_BYTE, i, (byte) (3 * i + 1));
            }
            MemorySegment params = CudaKernel.pack(arena, 5, TensorMap.of(bytes));
            MemorySegment copy = arg(params, 1, 128);
            assertThat(copy.address()).isNotEqualTo(bytes.address());
            assertThat(copy.address() % 128).isZero();
            assertThat(copy.mismatch(bytes)).isEqualTo(-1);
            assertThatThrownBy(() -> TensorMap.of(arena.allocate(64))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("128");
        }
    }

    @SuppressWarnings("restricted")
    private static MemorySegment arg(MemorySegment params, int i, long bytes) {
        return params.getAtIndex(ValueLayout.ADDRESS, i).reinterpret(bytes);
    }

    @Test
    void launchDimensionsArePositive() {
        assertThat(CudaKernel.Dim.of(3, 2)).isEqualTo(new CudaKernel.Dim(3, 2, 1));
        assertThatThrownBy(() -> CudaKernel.Dim.of(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("dimensions must be >= 1, got (0, 1, 1)");
    }
}
