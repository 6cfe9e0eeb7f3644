package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Needs a GPU: skipped, with {@link Cuda#probe()}'s description as the reason, where there is none. */
class CudaGpuTest {

    private static final long SEED = 20261202L;
    private static CudaContext ctx;

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
    }

    @AfterAll
    static void close() {
        if (ctx != null) {
            ctx.close();
        }
    }

    private static MemorySegment randomFloats(Arena arena, int n, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(ValueLayout.JAVA_FLOAT, n);
        for (int i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) r.nextDouble(-1, 1));
        }
        return s;
    }

    @Test
    void copiesRoundTripAndFill() {
        int n = 1 << 20 | 3;
        try (Arena arena = Arena.ofConfined();
             DeviceBuffer a = ctx.allocate(4L * n);
             DeviceBuffer b = ctx.allocate(4L * n)) {
            MemorySegment host = randomFloats(arena, n, SEED);
            a.copyFrom(host);
            b.copyFrom(a, a.byteSize());
            MemorySegment back = arena.allocate(ValueLayout.JAVA_FLOAT, n).fill((byte) 0x7f);
            b.copyTo(back);
            assertThat(back.mismatch(host)).as("seed %d", SEED).isEqualTo(-1);

            b.fillInts(Float.floatToRawIntBits(1.5f));
            b.copyTo(back);
            assertThat(back.getAtIndex(ValueLayout.JAVA_FLOAT, n - 1)).isEqualTo(1.5f);
            b.fill((byte) 0);
            b.copyTo(back);
            assertThat(back.getAtIndex(ValueLayout.JAVA_FLOAT, 7)).isEqualTo(0f);
        }
    }

    @Test
    void asyncCopiesWithPinnedMemoryAndEventTiming() {
        long bytes = 64L << 20;
        try (PinnedBuffer pinned = ctx.allocatePinned(bytes);
             PinnedBuffer back = ctx.allocatePinned(bytes);
             DeviceBuffer dev = ctx.allocate(bytes);
             Stream stream = ctx.createStream();
             Event start = ctx.createEvent(true);
             Event end = ctx.createEvent(true)) {
            pinned.segment().fill((byte) 42);
            start.record(stream);
            dev.copyFromAsync(pinned.segment(), stream);
            dev.copyToAsync(back.segment(), stream);
            end.record(stream);
            end.synchronize();
            float ms = end.elapsedMillisSince(start);
            assertThat(back.segment().mismatch(pinned.segment())).isEqualTo(-1);
            assertThat(ms).isPositive();
            System.out.printf("H2D+D2H of 2 x %d MiB pinned: %.3f ms (%.1f GB/s)%n", bytes >> 20, ms,
                    2.0 * bytes / (ms * 1e6));
        }
    }

    @Test
    void ptxKernelLaunches() {
        int n = 100_003;
        float a = 0.75f;
        try (Arena arena = Arena.ofConfined();
             CudaModule module = ctx.loadPtx(TestPtx.axpy());
             DeviceBuffer x = ctx.allocate(4L * n);
             DeviceBuffer y = ctx.allocate(4L * n);
             Stream stream = ctx.createStream()) {
            MemorySegment hx = randomFloats(arena, n, SEED);
            MemorySegment hy = randomFloats(arena, n, SEED + 1);
            x.copyFrom(hx);
            y.copyFrom(hy);
            CudaKernel axpy = module.function("axpy");
            assertThat(axpy.maxActiveBlocksPerMultiprocessor(256, 0)).isPositive();
            axpy.launch(CudaKernel.Dim.of((n + 255) / 256), CudaKernel.Dim.of(256), 0, stream, a, x, y, n);
            stream.synchronize();
            MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT, n);
            y.copyTo(out);
            for (int i = 0; i < n; i++) {
                float expected = Math.fma(hx.getAtIndex(ValueLayout.JAVA_FLOAT, i), a,
                        hy.getAtIndex(ValueLayout.JAVA_FLOAT, i));
                assertThat(out.getAtIndex(ValueLayout.JAVA_FLOAT, i)).as("y[%d], seed %d", i, SEED)
                        .isEqualTo(expected);
            }
        }
    }

    @Test
    void brokenPtxThrowsWithTheJitLog() {
        assertThatThrownBy(() -> ctx.loadPtx(TestPtx.broken()))
                .isInstanceOf(CudaException.class)
                .hasMessageContaining("cuModuleLoadDataEx")
                .hasMessageContaining("%f9")
                .satisfies(e -> assertThat(((CudaException) e).errorName()).startsWith("CUDA_ERROR_"));
    }

    @Test
    void unknownKernelAndUseAfterClose() {
        CudaModule module = ctx.loadPtx(TestPtx.axpy());
        assertThatThrownBy(() -> module.function("nope")).isInstanceOf(CudaException.class)
                .hasMessageContaining("CUDA_ERROR_NOT_FOUND");
        CudaKernel k = module.function("axpy");
        module.close();
        module.close();
        assertThatThrownBy(() -> k.launch(CudaKernel.Dim.of(1), CudaKernel.Dim.of(1), 0, null, 1f, 0L, 0L, 0))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("CudaModule");
        DeviceBuffer b = ctx.allocate(16);
        b.close();
        assertThatThrownBy(b::address).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("DeviceBuffer(16 bytes) is closed");
    }
}
