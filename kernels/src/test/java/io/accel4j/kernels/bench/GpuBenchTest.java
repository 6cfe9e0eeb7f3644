package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaProbe;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GpuBenchTest {

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    private int run(CudaProbe probe, String... args) {
        return GpuBench.run(args, () -> probe, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    @Test
    void withoutAGpuItSaysWhyInOneLineAndExitsWithItsOwnCode(@TempDir Path dir) {
        CudaProbe none = new CudaProbe.NoDevice(12080, "cuInit: CUDA_ERROR_NO_DEVICE");
        int code = run(none, "--out", dir.resolve("bench").toString());
        assertThat(code).isEqualTo(GpuBench.EXIT_NO_GPU).isNotIn(0, 1, 2);
        assertThat(err.toString(StandardCharsets.UTF_8))
                .isEqualTo("gpu-bench: no GPU: no CUDA device (driver 12.8: cuInit: CUDA_ERROR_NO_DEVICE)"
                        + System.lineSeparator());
        assertThat(out.toString(StandardCharsets.UTF_8)).isEmpty();
    }

    @Test
    void withThisMachinesProbeWhenItHasNoGpu() {
        CudaProbe probe = Cuda.probe();
        assumeFalse(probe.ready(), "this machine has a GPU");
        assertThat(run(probe)).isEqualTo(GpuBench.EXIT_NO_GPU);
        assertThat(err.toString(StandardCharsets.UTF_8)).startsWith("gpu-bench: no GPU: " + probe.describe())
                .doesNotContain("Exception", "\tat ");
    }

    @Test
    void usageErrorsComeBeforeTheProbeAndExitTwo() {
        CudaProbe none = new CudaProbe.DriverNotFound(List.of("/nowhere"));
        assertThat(run(none, "--only", "gemm,attn")).isEqualTo(GpuBench.EXIT_USAGE);
        assertThat(err.toString(StandardCharsets.UTF_8)).startsWith(
                "gpu-bench: --only takes adamw,attention,gemm,tma, got attn").contains(GpuBench.USAGE);
        assertThat(run(none, "--budget-s", "-1")).isEqualTo(GpuBench.EXIT_USAGE);
        assertThat(run(none, "--out")).isEqualTo(GpuBench.EXIT_USAGE);
        assertThat(run(none, "--frobnicate")).isEqualTo(GpuBench.EXIT_USAGE);
    }

    @Test
    void optionsHaveDefaultsAndTakeValues() {
        GpuBench.Options d = GpuBench.Options.parse(new String[0]);
        assertThat(d.out()).isNull();
        assertThat(d.budgetSeconds()).isEqualTo(240);
        assertThat(d.groups()).isEqualTo(GpuBench.GROUPS);
        GpuBench.Options o = GpuBench.Options.parse(new String[] {"--out", "x/y", "--budget-s", "30", "--case-s",
            "0.5", "--only", "adamw", "--seed", "7", "--debug"});
        assertThat(o).isEqualTo(new GpuBench.Options(Path.of("x/y"), 30, 0.5, Set.of("adamw"), 7, true, false));
        assertThatThrownBy(() -> GpuBench.Options.parse(new String[] {"--seed", "x"}))
                .hasMessage("--seed takes an integer, got x");
    }

    @Test
    void listPrintsEveryCaseWithoutAGpu() {
        CudaProbe none = new CudaProbe.DriverNotFound(List.of("/nowhere"));
        assertThat(run(none, "--list")).isEqualTo(GpuBench.EXIT_OK);
        List<String> lines = out.toString(StandardCharsets.UTF_8).lines().toList();
        // 6 shapes × 8 GEMM variants, 4 AdamW/copy, bf16 wgmma and wgmma tma attention: 2 × 2 masks × 2 hd × 6 T ×
        // fwd, bf16 wmma attention: 2 masks × 2 hd × 3 T (≥ 4k) × (fwd, fwd+bwd), fp32 attention: 2 hd × 2 T (≥ 8k)
        // × (fwd, fwd+bwd) + 1 skip line
        assertThat(lines).hasSize(48 + 4 + 48 + 24 + 9 + 1);
        assertThat(lines.getLast()).isEqualTo("133 cases");
        assertThat(lines.getFirst()).startsWith("gemm      GpuOps fp32").contains("square 8192x8192x8192", "1.100e+12 FLOP");
        assertThat(lines).anySatisfy(l -> assertThat(l).contains("(skipped: GpuOps fp32 is causal only)"));
        assertThat(lines).anySatisfy(l -> assertThat(l).startsWith("attention flash bf16 fwd+bwd")
                .contains("hd128 T16384 B1 NH16 full"));
        assertThat(lines).anySatisfy(l -> assertThat(l).startsWith("attention flash bf16 wgmma fwd ")
                .contains("hd128 T16384 B1 NH16 full"));
        assertThat(lines).anySatisfy(l -> assertThat(l).startsWith("attention flash bf16 wgmma tma fwd ")
                .contains("hd64 T512 B32 NH32 causal"));
        assertThat(lines).noneSatisfy(l -> assertThat(l).startsWith("attention flash bf16 fwd").contains(" T2048 "));
        assertThat(lines).anySatisfy(l -> assertThat(l).startsWith("gemm      GpuMatmul fp8e4m3xe5m2"));
        assertThat(err.toString(StandardCharsets.UTF_8)).isEmpty();
        // the TMA forward is its own group, listed last (the GPU check runs it in a process of its own)
        List<String> cases = lines.subList(0, lines.size() - 1);
        assertThat(cases.subList(cases.size() - 24, cases.size()))
                .allSatisfy(l -> assertThat(l).startsWith("attention flash bf16 wgmma tma fwd "));
        out.reset();
        assertThat(run(none, "--list", "--only", "adamw")).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8).lines()).hasSize(5);
        out.reset();
        assertThat(run(none, "--list", "--only", "gemm,adamw,attention")).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8).lines()).hasSize(133 - 24 + 1)
                .noneSatisfy(l -> assertThat(l).contains("wgmma tma"));
        out.reset();
        assertThat(run(none, "--list", "--only", "tma")).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8).lines()).hasSize(24 + 1);
    }

    @Test
    void progressLinesSayTheFigureAndItsShareOfThePeak() {
        Case c = Case.of("gemm", "GpuOps fp32", "qkv 8192x768x2304", Flops.gemm(8192, 2304, 768), Ceiling.FP32,
                () -> null);
        Result r = Result.ok(c, new Stats(1, 0.9, 20));
        assertThat(GpuBench.progress(3, 50, r)).isEqualTo(
                "[3/50] gemm GpuOps fp32 qkv 8192x768x2304: 29.0 TFLOP/s (43.3% of FP32), median 1.000 ms over 20");
        assertThat(GpuBench.progress(4, 50, Result.notRun(c, Result.Status.SKIPPED, "time budget spent")))
                .isEqualTo("[4/50] gemm GpuOps fp32 qkv 8192x768x2304: SKIPPED time budget spent");
    }
}
