package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.StubDriver;
import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link GpuOps} and {@link CudaMemory} against panama-cuda's stub driver (a test double of {@code libcuda.so.1} over
 * host memory; no kernel runs): which modules load when, what a failed JIT breaks, what crosses the native boundary.
 * Skipped, saying why, where the stub could not be built or loaded.
 */
class GpuOpsStubTest {

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

    @BeforeEach
    void reset() {
        StubDriver.reset();
    }

    private static long moduleLoads() {
        return StubDriver.calls("cuModuleLoadDataEx");
    }

    /** Issue 18, item 3: modules are loaded when one of their kernels is first used, each load recorded. */
    @Test
    void modulesLoadOnFirstUseAndEachLoadIsRecorded() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            List<String> before = gpu.moduleLoads().stream().map(KernelModules.Load::module).toList();
            assertThat(before).as("at most the matmul's modules, where cuBLASLt is found")
                    .isSubsetOf("matmul", "cast").doesNotContain("layernorm", "attention_wgmma");
            MemorySegment x = arena.allocate(4 * 64), y = arena.allocate(4 * 64);
            long loads = moduleLoads();
            gpu.geluForward(y, x, 64);
            gpu.geluForward(y, x, 64);
            assertThat(moduleLoads()).as("gelu's module, once: its cubin (which the stub refuses), then its PTX")
                    .isEqualTo(loads + 2);
            KernelModules.Load gelu = gpu.moduleLoads().getLast();
            assertThat(gelu.module()).isEqualTo("gelu");
            assertThat(gelu.arch()).isEqualTo("sm_90a");
            assertThat(gelu.image()).isEqualTo("ptx (cubin: CUDA_ERROR_INVALID_IMAGE)");
            assertThat(gelu.ok()).isTrue();
            assertThat(gelu.status()).isEqualTo("ok");
            assertThat(gelu.log()).startsWith("stub: ").contains("entries parsed");
            assertThat(StubDriver.lastLaunch().orElseThrow().kernel()).isEqualTo("gelu_forward");
        }
    }

    /** Issue 18, item 3: one module the JIT rejects (here: wgmma) used to fail the constructor, and so every op. */
    @Test
    void aModuleTheJitRejectsFailsOnlyItsOwnKernels() {
        StubDriver.fail("cuModuleLoadDataEx", "attention_wgmma_forward", cuda_h.CUDA_ERROR_INVALID_PTX, -1);
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int N = 4, C = 32;
            MemorySegment out = arena.allocate(4L * N * C), mean = arena.allocate(4L * N);
            MemorySegment rstd = arena.allocate(4L * N), inp = arena.allocate(4L * N * C);
            MemorySegment w = arena.allocate(4L * C), b = arena.allocate(4L * C);
            gpu.layernormForward(out, mean, rstd, inp, w, b, N, C);
            assertThat(StubDriver.lastLaunch().orElseThrow().kernel()).isEqualTo("layernorm_forward");

            List<KernelModules.Load> all = gpu.loadAllModules();
            assertThat(all).extracting(KernelModules.Load::module).containsExactlyInAnyOrderElementsOf(Kernels.MODULES);
            KernelModules.Load wgmma = all.stream().filter(l -> l.module().equals("attention_wgmma")).findFirst()
                    .orElseThrow();
            assertThat(wgmma.ok()).isFalse();
            assertThat(wgmma.status()).isEqualTo("CUDA_ERROR_INVALID_PTX");
            assertThat(wgmma.rc()).isEqualTo(cuda_h.CUDA_ERROR_INVALID_PTX);
            assertThat(wgmma.log()).contains("stub: injected failure 218");
            assertThat(all).filteredOn(l -> !l.module().equals("attention_wgmma")).allMatch(KernelModules.Load::ok);

            long loads = moduleLoads();
            assertThatThrownBy(() -> gpu.kernel(Kernels.ATTENTION_WGMMA_FORWARD)).isInstanceOf(CudaException.class)
                    .hasMessageContaining("module attention_wgmma, sm_90a").hasMessageContaining("CUDA_ERROR_INVALID_PTX");
            assertThat(moduleLoads()).as("a failed module is not JIT-compiled again").isEqualTo(loads);
        }
    }

    /** Issue 18, item 7: fp32 attention at head size 128 takes exactly 48 KiB of dynamic shared memory. */
    @Test
    void attentionAtHeadSize128OptsInToItsSharedMemory() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int B = 1, T = 8, NH = 2, C = 256;
            MemorySegment out = arena.allocate(4L * B * T * C), lse = arena.allocate(4L * B * NH * T);
            MemorySegment qkv = arena.allocate(4L * B * T * 3 * C);
            gpu.attentionForward(out, lse, qkv, B, T, C, NH, DType.FP32);
            StubDriver.Launch l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("attention_forward");
            assertThat(l.sharedBytes()).isEqualTo(48 * 1024);
            assertThat(StubDriver.dynamicSharedAttribute("attention_forward")).isEqualTo(48 * 1024);
        }
    }

    /** Issue 18, item 2: the device memory's copies took heap segments straight to the downcall, which refuses them. */
    @Test
    void cudaMemoryCopiesHeapSegments() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            float[] values = {1f, -2f, 3.5f, Float.MIN_VALUE, 1e30f};
            MemorySegment d = arena.allocate(4L * values.length);
            gpu.memory().copyToDevice(MemorySegment.ofArray(values), d);
            float[] back = new float[values.length];
            Arrays.fill(back, Float.NaN);
            gpu.memory().copyToHost(d, MemorySegment.ofArray(back));
            assertThat(back).containsExactly(values);
        }
    }

    /** Each launch's arguments reach the driver as the signature says (the stub checks the count against the PTX). */
    @Test
    void launchArgumentsReachTheDriverInSignatureOrder() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            MemorySegment a = arena.allocate(4 * 100), b = arena.allocate(4 * 100), c = arena.allocate(4 * 100);
            gpu.residualForward(c, a, b, 100);
            StubDriver.Launch l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("residual_forward");
            assertThat(l.params().length).isEqualTo(4);
            assertThat(l.longParam(0)).isEqualTo(c.address());
            assertThat(l.longParam(1)).isEqualTo(a.address());
            assertThat(l.longParam(2)).isEqualTo(b.address());
            assertThat(l.longParam(3)).isEqualTo(100L);
            assertThat(l.grid()).containsExactly(1, 1, 1);
            assertThat(l.block()).containsExactly(GpuLaunch.BLOCK, 1, 1);
        }
    }

    /** SGD and Lion launch sgd_f32 and lion_f32 with their signatures' arguments (first step, NULL buffer, decay). */
    @Test
    void sgdAndLionLaunchTheirKernels() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int n = 37;
            MemorySegment p = arena.allocate(4L * n), g = arena.allocate(4L * n), s = arena.allocate(4L * n);
            gpu.sgd(p, g, s, 0, n, new SgdConfig(0.1f, 0.9f, 0f, 0.01f, true), 1, 0.5f);
            StubDriver.Launch l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("sgd_f32");
            assertThat(l.params().length).isEqualTo(11);
            assertThat(l.longParam(2)).isEqualTo(s.address());
            assertThat(l.longParam(3)).isEqualTo((long) n);
            assertThat(l.floatParam(4)).isEqualTo(0.1f);
            assertThat(l.floatParam(8)).isEqualTo(0.5f);
            assertThat(l.intParam(9)).as("first step").isEqualTo(1);
            assertThat(l.intParam(10)).as("nesterov").isEqualTo(1);
            gpu.sgd(p, g, MemorySegment.NULL, 0, n, new SgdConfig(0.1f, 0f, 0f, 0f, false), 2, 1f);
            l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.longParam(2)).as("no momentum: no buffer").isZero();
            assertThat(l.intParam(9)).isZero();
            LionConfig lion = new LionConfig(0.01f, 0.9f, 0.99f, 0.1f);
            gpu.lion(p, g, s, 0, n, lion, 1f);
            l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("lion_f32");
            assertThat(l.params().length).isEqualTo(9);
            assertThat(l.floatParam(7)).isEqualTo(lion.decayFactor());
            assertThatThrownBy(() -> gpu.lion(p, g, s, 0, n + 1, lion, 1f)).hasMessageContaining("m");
        }
    }

    /** Issue 18, item 5: the FP8 cast-transpose needs no cuBLAS, and is there where cuBLASLt is missing. */
    @Test
    void theFp8CastTransposeNeedsNoCublas() {
        try (GpuOps gpu = new GpuOps(ctx); DeviceArena arena = gpu.memory().arena()) {
            int R = 40, C = 70;
            MemorySegment src = arena.allocate(4L * R * C), dst = arena.allocate((long) R * C);
            MemorySegment dstT = arena.allocate((long) R * C);
            gpu.castTransposeToFp8(dst, dstT, DType.FP8_E4M3, src, R, C, 8f);
            StubDriver.Launch l = StubDriver.lastLaunch().orElseThrow();
            assertThat(l.kernel()).isEqualTo("cast_transpose_f32_to_fp8");
            assertThat(l.grid()).containsExactly(CastTransposeGpu.grid(R, C), 1, 1);
            assertThat(l.intParam(4)).isEqualTo(R);
            assertThat(l.intParam(5)).isEqualTo(C);
            assertThat(l.floatParam(6)).isEqualTo(8f);
            assertThat(l.intParam(7)).as("E4M3").isEqualTo(1);
        }
    }
}
