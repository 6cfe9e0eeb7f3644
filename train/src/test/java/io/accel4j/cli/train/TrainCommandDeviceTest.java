package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cli.CliException;
import io.accel4j.cli.Main;
import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import picocli.CommandLine;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --device}: cpu by default; cuda is an error naming the probe's result where no GPU is usable (or
 * fewer GPUs than ranks, or no NCCL for several), a usage error with what the GPU path does not do yet, and where a
 * GPU is usable the same losses as the CPU run — with several GPUs, for data-parallel ranks on NCCL too.
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
        // bf16, fp16 and fp8 operands are the GPU's too: the same runtime error, not a usage error
        for (String precision : new String[] {"bf16", "fp16", "fp8"}) {
            Result p = run(quick(dir, "--device", "cuda", "--steps", "1", "--precision", precision));
            assertThat(p.code()).as(precision).isEqualTo(1);
            assertThat(p.err()).as(precision).startsWith("accel4j: error: --device cuda: no usable GPU");
        }
    }

    @Test
    void whatTheGpuPathDoesNotDoYetIsAUsageError() {
        String out = tmp.resolve("x").toString();
        String[][] cases = {
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

    /**
     * --device cuda --precision fp8 with shapes the GPU's FP8 GEMMs cannot take (K a multiple of 16): a usage error
     * naming the dimension, before any GPU is looked for or anything written — B·T, then a model of width 24.
     */
    @Test
    void fp8ShapesTheGpuCannotTakeAreAUsageErrorNamingTheDimension() throws IOException {
        Path dir = tmp.resolve("fp8-shapes");
        Result rows = run("train", "--out", dir.toString(), "--device", "cuda", "--precision", "fp8", "--batch", "3",
                "--seq", "7");
        assertThat(rows.code()).as(rows.err()).isEqualTo(2);
        assertThat(rows.err()).startsWith("accel4j: error: --device cuda --precision fp8 needs --batch × --seq")
                .contains("got 3 × 7 = 21");
        Path narrow = tmp.resolve("narrow.bin");
        try (Parallel pool = new Parallel(1);
             Gpt2 g = new Gpt2(new GptConfig(16, 256, 256, 1, 2, 24), new CpuOps(pool), 1, 16)) {
            g.initialise(1);
            g.save(narrow);
        }
        Result width = run(quick(dir, "--device", "cuda", "--precision", "fp8", "--model", narrow.toString()));
        assertThat(width.code()).as(width.err()).isEqualTo(2);
        assertThat(width.err()).startsWith("accel4j: error: --device cuda --precision fp8 needs the model's width")
                .contains("this model's is 24").contains("use --device cpu");
        assertThat(dir).as("nothing written").doesNotExist();
    }

    @Test
    void cudaRanksWithoutAGpuAreAnErrorNamingTheProbe() {
        CudaProbe probe = Cuda.probe();
        assumeFalse(probe.ready(), "a GPU is usable here: " + probe.describe());
        Path dir = tmp.resolve("nogpu-ranks");
        for (String zero : new String[] {"0", "1", "3"}) {
            Result r = run(quick(dir, "--device", "cuda", "--steps", "1", "--ranks", "2", "--zero", zero));
            assertThat(r.code()).as(r.err()).isEqualTo(1);
            assertThat(r.err()).startsWith("accel4j: error: --device cuda: no usable GPU: CUDA " + probe.describe());
        }
        // one rank of 'mpirun -np 2' on this machine: the same, before MPI is even initialised
        Result r = runAs(mpirun(0, 2, 2, "0"), quick(dir, "--device", "cuda", "--steps", "1"));
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        assertThat(r.err()).startsWith("accel4j: error: --device cuda: no usable GPU: CUDA " + probe.describe());
        assertThat(dir).as("nothing written").doesNotExist();
    }

    @Test
    void underMpirunTheLocalRankMustBeKnown() {
        Path dir = tmp.resolve("nolocal");
        // 2 ranks, 1 on this machine, and no OMPI_COMM_WORLD_LOCAL_RANK: which GPU is unknown
        Result r = runAs(mpirun(1, 2, 1, null), quick(dir, "--device", "cuda", "--steps", "1"));
        assertThat(r.code()).as(r.err()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: mpirun did not set " + Launch.LOCAL_RANK
                + ", which picks each process's GPU with --device cuda");
        assertThat(dir).doesNotExist();
    }

    @Test
    void fewerGpusThanRanksOrNoNcclAreErrorsSayingWhatWasFound() {
        CudaProbe oneGpu = new CudaProbe.Ready("Test GPU", 90, 132, 1L << 37, 13000, 1, "libcuda.so.1");
        CudaProbe twoGpus = new CudaProbe.Ready("Test GPU", 90, 132, 1L << 37, 13000, 2, "libcuda.so.1");
        CudaLibraries.Search noNccl = new CudaLibraries.Search("libnccl.so.2", null, null, List.of("/opt/a",
                "/opt/b"));
        assertThatThrownBy(() -> Backend.check(Backend.Device.CUDA, 2, () -> oneGpu, () -> noNccl))
                .isInstanceOf(CliException.class)
                .hasMessageStartingWith("--device cuda with 2 ranks on this machine needs 2 GPUs (one per rank), "
                        + "but CUDA finds 1 (Test GPU")
                .hasMessageContaining("run at most 1 rank per machine");
        assertThatThrownBy(() -> Backend.check(Backend.Device.CUDA, 2, () -> twoGpus, () -> noNccl))
                .isInstanceOf(CliException.class)
                .hasMessageContaining("averages the gradients with NCCL, but libnccl was not found (searched: "
                        + "/opt/a, /opt/b)");
        Backend.check(Backend.Device.CUDA, 1, () -> oneGpu, () -> noNccl); // one rank needs no NCCL
        Backend.check(Backend.Device.CPU, 8, () -> {
            throw new AssertionError("the CPU needs no probe");
        }, () -> noNccl);
    }

    /** Needs two GPUs and NCCL: 2 ranks on cuda train like 2 ranks on the CPU (plain DDP and ZeRO 1..3). */
    @Test
    void cudaRanksTrainLikeCpuRanks() throws IOException {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe instanceof CudaProbe.Ready r && r.deviceCount() >= 2, "needs 2 GPUs: CUDA "
                + probe.describe());
        assumeTrue(CudaLibraries.nccl().found(), "NCCL: " + CudaLibraries.nccl().notFoundMessage());
        for (String zero : new String[] {"0", "1", "2", "3"}) {
            String[] common = {"--steps", "4", "--val-every", "2", "--samples", "0", "--eval-problems", "0",
                "--ranks", "2", "--zero", zero, "--data-order", "sequential"};
            Result cpu = run(quick(tmp.resolve("cpu" + zero), common));
            Result gpu = run(quick(tmp.resolve("gpu" + zero), concat(common, "--device", "cuda")));
            assertThat(cpu.code()).as(cpu.err()).isZero();
            assertThat(gpu.code()).as(gpu.err()).isZero();
            assertThat(gpu.out()).contains("2 data-parallel ranks in this process over NCCL", "done: 4 steps");
            assertSameLosses(metrics(tmp.resolve("gpu" + zero)), metrics(tmp.resolve("cpu" + zero)));
        }
    }

    /** {@code mpirun}'s variables for world rank {@code rank} of {@code size}, {@code local} on this machine. */
    private static Map<String, String> mpirun(int rank, int size, int local, String localRank) {
        Map<String, String> env = new HashMap<>(Map.of(Launch.WORLD_RANK, Integer.toString(rank), Launch.WORLD_SIZE,
                Integer.toString(size), Launch.LOCAL_SIZE, Integer.toString(local)));
        if (localRank != null) {
            env.put(Launch.LOCAL_RANK, localRank);
        }
        return env;
    }

    /** {@code accel4j args} with {@code env} as the train command's environment. */
    private static Result runAs(Map<String, String> env, String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        TrainCommand train = cl.getSubcommands().get("train").getCommand();
        train.env = env;
        int code = cl.execute(args);
        return new Result(code, out.toString(), err.toString(), train);
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
        assertSameLosses(metrics(tmp.resolve("gpu")), metrics(tmp.resolve("cpu")));
    }

    /** Each line's train and val loss within {@link #LOSS_REL} of the CPU's (NaN where the CPU has NaN). */
    private static void assertSameLosses(List<StepMetrics> g, List<StepMetrics> c) {
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
