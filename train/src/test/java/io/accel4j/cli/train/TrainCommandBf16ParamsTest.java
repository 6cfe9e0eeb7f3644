package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static io.accel4j.cli.train.TrainCommandTest.trainLosses;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.Bf16ParamsPlan;
import io.accel4j.train.plan.MemoryPlan;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --bf16-params}: bf16 working weights trained on one rank, with DDP and with the optimizer offloaded, planned and found by
 * --find-batch-size, resumed bit for bit; and what it needs or does not compose with yet exits 2 with one line naming both flags, before anything is
 * written.
 */
class TrainCommandBf16ParamsTest {

    private static final String[] QUIET = {"--steps", "3", "--val-every", "0", "--samples", "0",
        "--eval-problems", "0"};

    @TempDir
    Path tmp;

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    @Test
    void findBatchSizePlansBf16WorkingWeightsAndTheTrialStepAllocatesThem() throws IOException {
        long budget = Bf16ParamsPlan.of(GptConfig.TINY, 24, 16, Recompute.NONE, DType.BF16, DType.BF16).total();
        int largest = Bf16ParamsPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, DType.BF16, DType.BF16, budget,
                1024);
        assertThat(largest).isEqualTo(24);
        Path dir = tmp.resolve("find");
        Result r = run(quick(dir, concat(QUIET, "--precision", "bf16", "--grad-storage", "bf16", "--bf16-params",
                "--find-batch-size", "--memory-budget", Long.toString(budget))));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("gradients in bf16, bf16 working weights: at most 24 sequences of 16 tokens "
                + "fit; using --batch 24").contains("as planned").contains("working weights in bf16");
        assertThat(trainLosses(dir)).hasSize(3);
        // the same budget without --bf16-params fits more: the master (4 bytes a parameter) outweighs the 2 saved
        assertThat(MemoryPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, 0, 1, DType.BF16, DType.BF16, budget,
                1024)).isGreaterThanOrEqualTo(largest);
    }

    @Test
    void twoRanksTrainAndHoldTheSameMaster() throws IOException {
        Path dir = tmp.resolve("ddp");
        Result r = run(quick(dir, concat(QUIET, "--precision", "bf16", "--bf16-params", "--ranks", "2")));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("working weights in bf16");
        assertThat(trainLosses(dir)).hasSize(3).allSatisfy(l -> assertThat(Double.parseDouble(l.split(":")[1])).isFinite());
    }

    @Test
    void withTheOptimizerOffloadedTheDeviceKeepsBf16WeightsAndGradients() throws IOException {
        Path dir = tmp.resolve("offload");
        Result r = run(quick(dir, concat(QUIET, "--precision", "bf16", "--bf16-params", "--grad-storage", "bf16",
                "--offload-optimizer")));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("optimizer offloaded to host memory:").contains("(bf16 parameters, gradients, "
                + "activations)").contains("working weights in bf16").contains("gradients stored in bf16");
        assertThat(trainLosses(dir)).hasSize(3);
    }

    @Test
    void aResumeContinuesBitForBit() throws IOException {
        String[] common = {"--steps", "4", "--val-every", "0", "--save-every", "2", "--samples", "0",
            "--eval-problems", "0", "--precision", "bf16", "--bf16-params"};
        Path whole = tmp.resolve("whole"), split = tmp.resolve("split");
        Result a = run(quick(whole, common));
        assertThat(a.code()).as(a.err()).isZero();
        for (Path dir : new Path[] {split}) {
            String[] half = quick(dir, common);
            half[java.util.Arrays.asList(half).indexOf("--steps") + 1] = "2";
            Result b = run(half);
            assertThat(b.code()).as(b.err()).isZero();
        }
        Result c = run("train", "--resume", split.toString(), "--steps", "4", "--threads", "2");
        assertThat(c.code()).as(c.err()).isZero();
        assertThat(c.out()).contains("working weights in bf16");
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin"}) {
            assertThat(Files.readAllBytes(split.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(whole.resolve(f)));
        }
        assertThat(trainLosses(split)).containsExactlyElementsOf(trainLosses(whole));
    }

    @Test
    void whatItNeedsOrDoesNotComposeWithYetExitsTwoNamingBoth() {
        record Case(String message, String[] flags) {}
        for (Case c : List.of(
                new Case("--bf16-params needs --precision bf16 (this run is fp32)", new String[] {"--bf16-params"}),
                new Case("--bf16-params needs --precision bf16 (this run is fp16)",
                        new String[] {"--bf16-params", "--precision", "fp16"}),
                new Case("--bf16-params needs --precision bf16 (this run is fp8)",
                        new String[] {"--bf16-params", "--precision", "fp8"}),
                new Case("--bf16-params does not go with --zero 1 yet: drop one of them",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "2", "--zero", "1"}),
                new Case("--bf16-params does not go with --zero 3 yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "2", "--zero", "3"}),
                new Case("--offload-optimizer does not go with --find-batch-size yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--offload-optimizer",
                            "--find-batch-size", "--memory-budget", "1g"}),
                new Case("--bf16-params does not go with --pp yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "2", "--pp", "2"}),
                new Case("--bf16-params does not go with --tp yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "2", "--tp", "2"}),
                new Case("--bf16-params does not go with --sync async yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "3", "--sync", "async"}),
                new Case("--bf16-params does not go with --bucket-mb yet",
                        new String[] {"--bf16-params", "--precision", "bf16", "--ranks", "2", "--bucket-mb", "1"}))) {
            Path dir = tmp.resolve("x");
            Result r = run(quick(dir, concat(QUIET, c.flags())));
            assertThat(r.code()).as("%s: %s", c.message(), r.err()).isEqualTo(2);
            assertThat(r.err()).contains(c.message()).doesNotContain("\tat ");
            assertThat(dir).doesNotExist();
        }
    }
}
