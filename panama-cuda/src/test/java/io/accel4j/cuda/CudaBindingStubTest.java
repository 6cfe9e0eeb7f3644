package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cuda.bindings.cuda_h;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The binding layer (the real FFM downcalls, {@link CudaContext}, {@link DeviceBuffer}, {@link CudaModule},
 * {@link CudaKernel}, {@link Event}, the error path) against the stub driver: no GPU, no kernel runs; what is checked
 * is what crosses the native boundary. Skipped, saying why, where the stub could not be built or loaded.
 */
class CudaBindingStubTest {

    private static final long SEED = 20261203L;
    private static CudaContext ctx;

    @BeforeAll
    static void open() {
        StubDriver.assume();
        StubDriver.reset();
        ctx = Cuda.open(0);
    }

    @AfterAll
    static void close() {
        if (ctx != null) {
            ctx.close();
        }
    }

    @BeforeEach
    void reset() {
        StubDriver.reset();
    }

    static String axpyPtx() throws IOException {
        try (InputStream in = CudaBindingStubTest.class.getResourceAsStream("axpy.ptx")) {
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        }
    }

    @Test
    void probeIsReadyOnTheStub() {
        CudaProbe probe = Cuda.probe();
        assertThat(probe).isInstanceOf(CudaProbe.Ready.class);
        assertThat(probe.describe()).startsWith("accel4j stub driver (no GPU), compute capability 9.0, 132 SMs");
    }

    @Test
    void nativeCopiesRoundTrip() {
        int n = 1000;
        SplittableRandom r = new SplittableRandom(SEED);
        try (Arena arena = Arena.ofConfined(); DeviceBuffer a = ctx.allocate(4L * n); DeviceBuffer b = ctx.allocate(4L * n)) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, n);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) r.nextDouble());
            }
            a.copyFrom(host);
            b.copyFrom(a, a.byteSize());
            MemorySegment back = arena.allocate(ValueLayout.JAVA_FLOAT, n).fill((byte) 0x7f);
            b.copyTo(back);
            assertThat(back.mismatch(host)).as("seed %d", SEED).isEqualTo(-1);
        }
    }

    /** Issue 18, item 2: a heap segment (MemorySegment.ofArray) reached the downcall, which refuses heap memory. */
    @Test
    void heapSegmentsCopyThroughNativeStaging() {
        int n = (int) (HostCopy.STAGING_BYTES / 4) * 2 + 5; // more than two chunks
        float[] values = new float[n];
        SplittableRandom r = new SplittableRandom(SEED);
        for (int i = 0; i < n; i++) {
            values[i] = (float) r.nextDouble(-1, 1);
        }
        try (DeviceBuffer d = ctx.allocate(4L * n)) {
            d.copyFrom(MemorySegment.ofArray(values));
            float[] back = new float[n];
            java.util.Arrays.fill(back, Float.NaN);
            d.copyTo(MemorySegment.ofArray(back));
            assertThat(java.util.Arrays.mismatch(back, values)).as("first mismatch, seed %d", SEED).isEqualTo(-1);
        }
    }

    @Test
    void asynchronousCopiesRefuseHeapSegmentsSayingWhatToPass() {
        try (DeviceBuffer d = ctx.allocate(16); Stream s = ctx.createStream()) {
            assertThatThrownBy(() -> d.copyFromAsync(MemorySegment.ofArray(new byte[16]), s))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("cuMemcpyHtoDAsync_v2: host is a heap segment")
                    .hasMessageContaining("PinnedBuffer");
            assertThatThrownBy(() -> d.copyToAsync(MemorySegment.ofArray(new byte[16]), s))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("cuMemcpyDtoHAsync_v2: host is a heap segment");
        }
    }

    @Test
    void aFailedCallBecomesACudaExceptionWithTheDriversErrorName() {
        StubDriver.fail("cuMemAlloc_v2", "", cuda_h.CUDA_ERROR_OUT_OF_MEMORY, 1);
        assertThatThrownBy(() -> ctx.allocate(64)).isInstanceOf(CudaException.class)
                .hasMessage("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
                .satisfies(e -> assertThat(((CudaException) e).errorName()).isEqualTo("CUDA_ERROR_OUT_OF_MEMORY"));
        try (DeviceBuffer ok = ctx.allocate(64)) {
            assertThat(ok.byteSize()).as("the injected error was for one call").isEqualTo(64);
        }
    }

    @Test
    void copiesOutsideAnAllocationAreRefusedByTheDriver() {
        try (Arena arena = Arena.ofConfined(); DeviceBuffer d = ctx.allocate(64)) {
            assertThatThrownBy(() -> HostCopy.toDevice(d.address() + 32, arena.allocate(64), 64))
                    .isInstanceOf(CudaException.class).hasMessageContaining("CUDA_ERROR_INVALID_VALUE");
        }
    }

    @Test
    void moduleLoadParsesEntriesAndLaunchRecordsTheArguments() throws IOException {
        int before = StubDriver.liveModules();
        try (CudaModule m = ctx.loadPtx(axpyPtx()); DeviceBuffer x = ctx.allocate(64); DeviceBuffer y = ctx.allocate(64)) {
            assertThat(m.infoLog()).isEqualTo("stub: 1 entries parsed, nothing compiled");
            CudaKernel axpy = m.function("axpy");
            axpy.launch(CudaKernel.Dim.of(3), CudaKernel.Dim.of(128), 0, null, 2.5f, x, y, 16);

            StubDriver.Launch l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("axpy");
            assertThat(l.grid()).containsExactly(3, 1, 1);
            assertThat(l.block()).containsExactly(128, 1, 1);
            assertThat(java.util.Arrays.stream(l.params()).mapToInt(p -> p.length)).containsExactly(4, 8, 8, 4);
            assertThat(l.floatParam(0)).isEqualTo(2.5f);
            assertThat(l.longParam(1)).isEqualTo(x.address());
            assertThat(l.longParam(2)).isEqualTo(y.address());
            assertThat(l.intParam(3)).isEqualTo(16);
            assertThatThrownBy(() -> m.function("nope")).isInstanceOf(CudaException.class)
                    .hasMessageContaining("CUDA_ERROR_NOT_FOUND").hasMessageContaining("kernel name: nope");
        }
        assertThat(StubDriver.liveModules()).as("unloaded on close").isEqualTo(before);
    }

    @Test
    void aFailedJitEndsWithItsErrorLog() {
        assertThatThrownBy(() -> ctx.loadPtx(".version 8.0\n.target sm_90a\n.visible .entry k(\n\t.param .u64 k_p\n"))
                .isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)")
                .hasMessageContaining("JIT error log:\nstub: entry k has no parameter list");
    }

    /** Issue 18, item 7: 48 KiB of dynamic shared memory had no opt-in, so no headroom for static shared memory. */
    @Test
    void everyLaunchWithDynamicSharedMemoryOptsIn() throws IOException {
        try (CudaModule m = ctx.loadPtx(axpyPtx()); DeviceBuffer x = ctx.allocate(64)) {
            CudaKernel axpy = m.function("axpy");
            assertThat(StubDriver.dynamicSharedAttribute("axpy")).isEqualTo(-1);
            axpy.launch(CudaKernel.Dim.of(1), CudaKernel.Dim.of(32), 0, null, 1f, x, x, 1);
            assertThat(StubDriver.dynamicSharedAttribute("axpy")).as("no shared memory, no attribute").isEqualTo(-1);

            axpy.launch(CudaKernel.Dim.of(1), CudaKernel.Dim.of(32), 48 * 1024, null, 1f, x, x, 1);
            assertThat(StubDriver.dynamicSharedAttribute("axpy")).isEqualTo(48 * 1024);
            axpy.launch(CudaKernel.Dim.of(1), CudaKernel.Dim.of(32), 100 * 1024, null, 1f, x, x, 1);
            assertThat(StubDriver.dynamicSharedAttribute("axpy")).isEqualTo(100 * 1024);
            long sets = StubDriver.calls("cuFuncSetAttribute");
            axpy.launch(CudaKernel.Dim.of(1), CudaKernel.Dim.of(32), 64 * 1024, null, 1f, x, x, 1);
            assertThat(StubDriver.calls("cuFuncSetAttribute")).as("set once per larger size").isEqualTo(sets);
        }
    }

    /** Issue 18, item 1: cuEventElapsedTime_v2 is 12.8+; an older driver has only cuEventElapsedTime. */
    @Test
    void eventTimingUsesTheUnversionedCallWhereTheDriverLacksV2() throws InterruptedException {
        assertThat(Event.hasElapsedTimeV2(CudaLibraries.driver())).isTrue();
        CudaLibraries.Search old = CudaLibraries.find(java.util.List.of(CudaLibraries.DRIVER),
                java.util.Map.of(CudaLibraries.PATH_ENV, StubDriver.dir().resolve("old").toString()), java.util.List.of());
        assertThat(old.found()).as(old.searched().toString()).isTrue();
        assertThat(Event.hasElapsedTimeV2(old)).isFalse();

        try (Event a = ctx.createEvent(true); Event b = ctx.createEvent(true)) {
            a.record(null);
            Thread.sleep(2);
            b.record(null);
            b.synchronize();
            assertThat(b.elapsedMillisSince(a)).isGreaterThanOrEqualTo(1f);
            assertThat(StubDriver.calls("cuEventElapsedTime_v2")).isEqualTo(1);
            assertThat(Event.elapsedMillis(false, a.handle(), b.handle())).isGreaterThanOrEqualTo(1f);
            assertThat(StubDriver.calls("cuEventElapsedTime")).isEqualTo(1);
        }
    }

    @Test
    void aCubinIsPassedAsItIsAndTheDriversRefusalNamed() {
        byte[] elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
        assertThatThrownBy(() -> ctx.loadCubin(elf)).isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_IMAGE (200)")
                .hasMessageContaining("stub: loads PTX text only, not a cubin");
        assertThatThrownBy(() -> ctx.loadCubin(new byte[] {'.', 'v'})).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a cubin");
    }
}
