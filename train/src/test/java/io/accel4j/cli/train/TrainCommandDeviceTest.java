package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.train.StepMetrics;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --device}: cpu by default; cuda is an error naming the probe's result where no GPU is usable, a usage
 * error with what the GPU path does not do yet, and where a GPU is usable the same losses as the CPU run.
 */
class TrainCommandDeviceTest {

    /**
     * Relative difference of a step's train loss, GPU vs CPU, tiny preset, 4 steps: both fp32, the kernels agree to
     * ≲1e-6 relative in practice (GpuOpsTest bounds each op at ≤2e-4 of its scale); the mean over B·T positions
     * and 4 AdamW steps keep the loss within ~1e-5, and 1e-4 leaves a margin (TF32 or a wrong kernel is far off).
     */
    static final double LOSS_REL = 1e-4;

    @TempDir
    Path tmp;

    @Test
    void theDeviceIsTheCpuByDefault() {
        Result r = run(quick(tmp.resolve("cpu"), "--steps", "1", "--val-every", "0", "--samples", "0",
                "--eval-problems", "0"));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out().lines().filter(l -> l.startsWith("using ")).toList()).singleElement().asString()
                .startsWith("using cpu: ");
    }

    @Test
    void cudaWithoutAGpuIsAnErrorNamingTheProbe() {
        CudaProbe probe = Cuda.probe();
        assumeFalse(probe.ready(), "a GPU is usable here: " + probe.describe());
        Path dir = tmp.resolve("nogpu");
        Result r = run(quick(dir, "--device", "cuda", "--steps", "1"));
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err()).startsWith("accel4j: error: --device cuda: no usable GPU: CUDA " + probe.describe());
        assertThat(r.out()).doesNotContain("using ");
        assertThat(dir).as("nothing written").doesNotExist();
    }

    @Test
    void whatTheGpuPathDoesNotDoYetIsAUsageError() {
        String out = tmp.resolve("x").toString();
        String[][] cases = {
            {"--ranks", "2", "does not support --ranks 2 (data parallelism averages gradients in host memory)"},
            {"--precision", "bf16", "does not support --precision bf16 (the GPU matmuls take fp32 operands only)"},
            {"--precision", "fp16", "does not support --precision fp16"},
            {"--profile", null, "does not support --profile"},
            {"--find-batch-size", "--memory-budget=1g", "does not support --find-batch-size"},
        };
        for (String[] c : cases) {
            Result r = c[1] == null ? run("train", "--device", "cuda", "--out", out, c[0])
                    : run("train", "--device", "cuda", "--out", out, c[0], c[1]);
            assertThat(r.code()).as(c[0]).isEqualTo(2);
            assertThat(r.err()).as(c[0]).startsWith("accel4j: error: --device cuda " + c[2])
                    .contains("use --device cpu");
        }
        Result r = run("train", "--device", "tpu", "--out", out);
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("'tpu' is not a device: cpu or cuda");
        assertThat(Path.of(out)).doesNotExist();
    }

    /** Needs a GPU: the tiny preset trained 4 steps on cuda and on the CPU gives the same losses. */
    @Test
    void cudaTrainsLikeTheCpu() throws IOException {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        String[] common = {"--steps", "4", "--val-every", "2", "--samples", "1", "--eval-problems", "2",
            "--save-every", "2"};
        Result cpu = run(quick(tmp.resolve("cpu"), common));
        Result gpu = run(quick(tmp.resolve("gpu"), concat(common, "--device", "cuda")));
        assertThat(cpu.code()).as(cpu.err()).isZero();
        assertThat(gpu.code()).as(gpu.err()).isZero();
        assertThat(gpu.out()).contains("using cuda: " + ((CudaProbe.Ready) probe).deviceName(), "done: 4 steps");
        assertThat(gpu.out().lines().filter(l -> l.startsWith("using cuda: ")).count()).isEqualTo(1);
        List<StepMetrics> c = metrics(tmp.resolve("cpu")), g = metrics(tmp.resolve("gpu"));
        assertThat(g).hasSameSizeAs(c);
        for (int i = 0; i < c.size(); i++) {
            for (double[] pair : new double[][] {{g.get(i).trainLoss(), c.get(i).trainLoss()},
                {g.get(i).valLoss(), c.get(i).valLoss()}}) {
                if (Double.isNaN(pair[1])) {
                    assertThat(pair[0]).as("line %d", i).isNaN();
                } else {
                    assertThat(pair[0]).as("line %d: GPU vs CPU loss", i).isCloseTo(pair[1],
                            offset(LOSS_REL * pair[1]));
                }
            }
        }
    }

    private static List<StepMetrics> metrics(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().map(StepMetrics::fromJson).toList();
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
