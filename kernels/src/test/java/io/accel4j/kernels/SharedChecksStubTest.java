package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.StubDriver;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 18: the GPU refuses bad arguments to attention, AdamW, the casts and the reductions with the CPU's own
 * message, because both call the contract's checks ({@code AttentionOps.checkForward}, {@code OptimizerOps.checkAdamW},
 * {@code CastOps.checkToFp8}, {@code ReductionOps.checkReduction}, …). Each case runs the same call with the same
 * (stub-device, host-backed) buffers on {@link CpuOps} and on {@link GpuOps} over panama-cuda's stub driver, and expects
 * the same exception type and message from both, and no launch from the GPU. Skipped, saying why, where the stub
 * could not be built or loaded.
 */
class SharedChecksStubTest {

    private static CudaContext ctx;
    private static Parallel pool;

    @BeforeAll
    static void open() {
        StubDriver.assume();
        ctx = Cuda.open(0);
        pool = new Parallel(1);
    }

    @AfterAll
    static void close() {
        StubDriver.reset();
        if (ctx != null) {
            ctx.close();
        }
        if (pool != null) {
            pool.close();
        }
    }

    @BeforeEach
    void reset() {
        StubDriver.reset();
    }

    /** Runs {@code call} on both backends; both must throw, alike, naming {@code mentions}; the GPU launches nothing. */
    private static void sameRefusal(GpuOps gpu, String mentions, Consumer<Ops> call) {
        Throwable onCpu = catchThrowable(() -> call.accept(new CpuOps(pool)));
        long launches = StubDriver.calls("cuLaunchKernel");
        Throwable onGpu = catchThrowable(() -> call.accept(gpu));
        assertThat(onCpu).as("the CPU refuses").isNotNull().hasMessageContaining(mentions);
        assertThat(onGpu).as("the GPU refuses as the CPU does").isNotNull()
                .hasSameClassAs(onCpu).hasMessage(onCpu.getMessage());
        assertThat(StubDriver.calls("cuLaunchKernel")).as("nothing launched").isEqualTo(launches);
    }

    @Test
    void attentionRefusesAsTheCpuDoes() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int B = 2, T = 5, C = 64, NH = 2;
            long bt = (long) B * T;
            MemorySegment out = arena.allocate(4 * bt * C), lse = arena.allocate(4L * B * NH * T);
            MemorySegment qkv = arena.allocate(4 * bt * 3 * C), dqkv = arena.allocate(4 * bt * 3 * C);
            MemorySegment dout = arena.allocate(4 * bt * C);
            sameRefusal(gpu, "divisible by NH", o -> o.attentionForward(out, lse, qkv, B, T, C, 3));
            sameRefusal(gpu, "B must be >= 1", o -> o.attentionForward(out, lse, qkv, 0, T, C, NH));
            sameRefusal(gpu, "lse holds", o -> o.attentionForward(out, lse.asSlice(0, 8), qkv, B, T, C, NH));
            sameRefusal(gpu, "qkv holds", o -> o.attentionForward(out, lse, qkv.asSlice(4), B, T, C, NH));
            sameRefusal(gpu, "dout holds",
                    o -> o.attentionBackward(dqkv, dout.asSlice(4), qkv, out, lse, B, T, C, NH));
            sameRefusal(gpu, "dqkv holds",
                    o -> o.attentionBackward(dqkv.asSlice(4), dout, qkv, out, lse, B, T, C, NH));
            sameRefusal(gpu, "FP16",
                    o -> o.attentionForward(out, lse, qkv, B, T, C, NH, DType.FP16));
        }
    }

    @Test
    void adamwRefusesAsTheCpuDoes() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int n = 41;
            MemorySegment p = arena.allocate(4L * n), g = arena.allocate(4L * n);
            MemorySegment m = arena.allocate(4L * n), v = arena.allocate(4L * n), p16 = arena.allocate(2L * n);
            AdamWConfig k = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f);
            sameRefusal(gpu, "gradScale must be finite", o -> o.adamw(p, g, m, v, 0, n, k, 1, Float.NaN));
            sameRefusal(gpu, "step must be >= 1", o -> o.adamw(p, g, m, v, 0, n, k, 0, 1f));
            sameRefusal(gpu, "m holds", o -> o.adamw(p, g, m.asSlice(4), v, 0, n, k, 1, 1f));
            sameRefusal(gpu, "offset + length overflows", o -> o.adamw(p, g, m, v, Long.MAX_VALUE, n, k, 1, 1f));
            sameRefusal(gpu, "paramsBf16 holds",
                    o -> o.adamwBf16(p16.asSlice(2), p, g, m, v, 0, n, k, 1, 1f, 7L));
            sameRefusal(gpu, "master holds",
                    o -> o.adamwBf16(p16, p.asSlice(4), g, m, v, 0, n, k, 1, 1f, 7L));
            List<AdamWRange> ranges = List.of(new AdamWRange(0, 0, 20, true), new AdamWRange(20, 20, 21, false));
            sameRefusal(gpu, "gradScale must be finite",
                    o -> o.adamw(p, g, m, v, ranges, k, 1, Float.POSITIVE_INFINITY));
        }
    }

    @Test
    void castsRefuseAsTheCpuDoes() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int n = 29;
            MemorySegment f32 = arena.allocate(4L * n), narrow = arena.allocate(2L * n);
            sameRefusal(gpu, "use castToFp8", o -> o.castFromFp32(narrow, DType.FP8_E4M3, f32, n));
            sameRefusal(gpu, "dst holds", o -> o.castFromFp32(narrow.asSlice(2), DType.BF16, f32, n));
            sameRefusal(gpu, "src holds", o -> o.castFromFp32(narrow, DType.BF16, f32.asSlice(4), n));
            sameRefusal(gpu, "n must be >= 0", o -> o.castFromFp32(narrow, DType.BF16, f32, -1));
            sameRefusal(gpu, "FP8_E4M3 or FP8_E5M2", o -> o.castToFp8(narrow, DType.BF16, f32, n, 1f));
            sameRefusal(gpu, "scale must be finite and > 0", o -> o.castToFp8(narrow, DType.FP8_E5M2, f32, n, 0f));
            sameRefusal(gpu, "scaleInv must be 1 for BF16",
                    o -> o.castToFp32(f32, narrow, DType.BF16, n, 2f));
            sameRefusal(gpu, "scaleInv must be finite and > 0",
                    o -> o.castToFp32(f32, narrow, DType.FP8_E4M3, n, Float.NaN));
        }
    }

    @Test
    void reductionsRefuseAsTheCpuDoes() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int n = 33;
            MemorySegment x = arena.allocate(4L * n);
            sameRefusal(gpu, "n must be >= 0", o -> o.sumOfSquares(x, -1));
            sameRefusal(gpu, "x holds 33 floats, 34 needed", o -> o.sumOfSquares(x, n + 1));
            sameRefusal(gpu, "x holds", o -> o.hasNonFinite(x.asSlice(4), n));
            sameRefusal(gpu, "x holds", o -> o.amax(x, n + 5));
        }
    }
}
