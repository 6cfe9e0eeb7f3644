package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link CudaMemory}: zeroed allocations, copies in, across and out that move exactly the bytes asked (slices
 * included), zeroing a slice, checked sizes, and {@link GpuOps#memory()} computing in it. Needs a GPU: skipped, with
 * {@link Cuda#probe()}'s description as the reason, where there is none.
 */
class CudaMemoryTest {

    private static final long SEED = 20261203L;
    private static CudaContext ctx;
    private static GpuOps gpu;

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
    }

    @AfterAll
    static void close() {
        if (gpu != null) {
            gpu.close();
        }
        if (ctx != null) {
            ctx.close();
        }
    }

    @Test
    void copiesRoundTripThroughSlicesAndZeroClearsOnlyItsSlice() {
        DeviceMemory memory = gpu.memory();
        assertThat(memory).isInstanceOf(CudaMemory.class);
        assertThat(memory.hostAccessible()).isFalse();
        SplittableRandom r = new SplittableRandom(SEED);
        int n = 1 + r.nextInt(5000), off = 1 + r.nextInt(13);
        byte[] data = new byte[n];
        for (int i = 0; i < n; i++) {
            data[i] = (byte) r.nextInt(1, 256);
        }
        try (DeviceArena arena = memory.arena(); Arena host = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(n + off), b = arena.allocate(n + 2L * off), empty = arena.allocate(0);
            assertThat(empty.byteSize()).isZero();
            MemorySegment in = host.allocate(n), out = host.allocate(n + 2L * off);
            MemorySegment.copy(data, 0, in, ValueLayout.JAVA_BYTE, 0, n);
            out.fill((byte) 0x55);
            memory.copyToHost(b, out);
            assertThat(out.toArray(ValueLayout.JAVA_BYTE)).as("allocations are zeroed").containsOnly((byte) 0);

            memory.copyToDevice(in, a.asSlice(off, n));
            memory.copy(a.asSlice(off, n), b.asSlice(off, n));
            out.fill((byte) 0x55);
            memory.copyToHost(b, out);
            assertThat(out.asSlice(off, n).toArray(ValueLayout.JAVA_BYTE)).as("seed %d", SEED).containsExactly(data);
            assertThat(out.asSlice(0, off).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0);
            assertThat(out.asSlice(off + n, off).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0);

            memory.zero(b.asSlice(off + 1, n - 1));
            memory.copyToHost(b.asSlice(off, 1), out.asSlice(0, 1));
            assertThat(out.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo(data[0]);
            memory.copyToHost(b.asSlice(off + 1, n - 1), out.asSlice(0, n - 1));
            assertThat(out.asSlice(0, n - 1).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0);

            assertThatThrownBy(() -> memory.copyToDevice(host.allocate(n + off + 1), a))
                    .hasMessage("device holds " + (n + off) + " bytes, the copy from host to device is "
                            + (n + off + 1));
        }
    }

    @Test
    void gpuOpsComputeInTheirMemory() {
        DeviceMemory memory = gpu.memory();
        int n = 1003;
        try (DeviceArena arena = memory.arena(); Arena host = Arena.ofConfined()) {
            MemorySegment x = arena.allocate(4L * n), h = host.allocate(ValueLayout.JAVA_FLOAT, n);
            double expected = 0;
            for (int i = 0; i < n; i++) {
                float v = (i % 7 - 3) * 0.25f;
                h.setAtIndex(ValueLayout.JAVA_FLOAT, i, v);
                expected += (double) v * v;
            }
            memory.copyToDevice(h, x);
            assertThat(gpu.sumOfSquares(x, n)).isEqualTo(expected); // quarters: every partial sum is exact
        }
    }
}
