package io.accel4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cli.Main;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@link GpuTrainStep}, the GPU check's GPT-2 step timing: "no GPU" and exit 3 without one, the command it runs, and
 * {@code bench train --device cuda}'s errors; with a GPU, a short run of both precisions.
 */
class GpuTrainStepTest {

    private record Result(int code, String out, String err) {}

    private static Result step(CudaProbe probe, String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        int code = GpuTrainStep.run(args, () -> probe, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Result(code, out.toString(), err.toString());
    }

    private static Result cli(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void withoutAGpuItSaysNoGpuAndExits3() {
        Result r = step(new CudaProbe.DriverNotFound(List.of("/nowhere/libcuda.so.1")));
        assertThat(r.code()).isEqualTo(GpuTrainStep.EXIT_NO_GPU).isEqualTo(3);
        assertThat(r.err()).isEqualTo("gpu-train: no GPU: driver not found (searched: /nowhere/libcuda.so.1)"
                + System.lineSeparator());
        assertThat(r.out()).isEmpty();
    }

    /** Issue 18, item 5: without cuBLASLt the step used to fail on its first matmul; now it skips, saying why. */
    @Test
    void withoutCublasLtItSkipsSayingWhyAndExits4() {
        CudaProbe ready = new CudaProbe.Ready("stand-in", 90, 132, 1L << 30, 12040, 1, "/x/libcuda.so.1");
        CudaLibraries.Search none = new CudaLibraries.Search("libcublasLt.so.13", null, null,
                List.of("dynamic loader (libcublasLt.so.13)", "/usr/local/cuda/lib64/libcublasLt.so.13"));
        StringWriter out = new StringWriter(), err = new StringWriter();
        int code = GpuTrainStep.run(new String[0], () -> ready, () -> none, new PrintWriter(out, true),
                new PrintWriter(err, true));
        assertThat(code).isEqualTo(GpuTrainStep.EXIT_NO_CUBLASLT).isEqualTo(4);
        assertThat(err.toString()).isEqualTo("gpu-train: skipped: needs cuBLASLt: libcublasLt.so.13 not found"
                + " (searched: dynamic loader (libcublasLt.so.13), /usr/local/cuda/lib64/libcublasLt.so.13)"
                + System.lineSeparator());
        assertThat(out.toString()).isEmpty();
    }

    @Test
    void theCommandIsBenchTrainOnTheGpuWithTheCallersArgumentsLast() {
        assertThat(GpuTrainStep.command("bf16", new String[] {"--steps", "3"})).containsExactly("bench", "train",
                "--device", "cuda", "--model", "gpt2", "--precision", "bf16", "--batch", "4", "--seq", "1024",
                "--warmup", "2", "--steps", "10", "--steps", "3");
    }

    @Test
    void benchTrainOnCudaWithoutAGpuIsAnErrorAndProfileIsAUsageError() {
        CudaProbe probe = Cuda.probe();
        Result profile = cli("bench", "train", "--device", "cuda", "--model", "tiny", "--profile");
        assertThat(profile.code()).isEqualTo(2);
        assertThat(profile.err()).startsWith("accel4j: error: --profile times calls on the host");
        assumeFalse(probe.ready(), "a GPU is usable here: " + probe.describe());
        Result r = cli("bench", "train", "--device", "cuda", "--model", "tiny", "--steps", "1");
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err()).startsWith("accel4j: error: --device cuda: no usable GPU: CUDA " + probe.describe());
        assertThat(r.out()).doesNotContain("training step");
    }

    /** Needs a GPU: two short steps of the tiny model per precision, timed on the device, with finite losses. */
    @Test
    void onAGpuBothPrecisionsPrintATableRow() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        Result r = step(probe, "--model", "tiny", "--batch", "2", "--seq", "64", "--warmup", "1", "--steps", "2");
        assertThat(r.code()).as(r.err()).isZero();
        List<String> rows = r.out().lines().filter(l -> l.strip().startsWith("cuda ")).toList();
        assertThat(rows).as(r.out()).hasSize(GpuTrainStep.PRECISIONS.size());
        for (String row : rows) {
            String[] f = row.strip().split("\\s+");
            assertThat(Double.parseDouble(f[3])).as("tokens/s").isPositive();
            assertThat(Double.parseDouble(f[5])).as("first loss ~ ln 256").isBetween(5.0, 6.5);
        }
    }
}
