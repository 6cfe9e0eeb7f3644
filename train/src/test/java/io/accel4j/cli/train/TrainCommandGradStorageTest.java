package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static io.accel4j.cli.train.TrainCommandTest.trainLosses;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.MemoryPlan;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --grad-storage bf16|fp16}: 16-bit gradient buffers, planned and found by --find-batch-size, trained
 * with one rank and DDP; and the combinations not supported yet exit 2 with one line naming both flags.
 */
class TrainCommandGradStorageTest {

    private static final String[] QUIET = {"--steps", "3", "--val-every", "0", "--samples", "0",
        "--eval-problems", "0"};

    @TempDir
    Path tmp;

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    @Test
    void findBatchSizePlansSixteenBitGradientsAndTheTrialStepAllocatesThem() throws IOException {
        // the tiny preset at T = 16: a budget that fits exactly 24 sequences with 16-bit activations and gradients
        // (its 2 layers gain nothing from 16-bit gradients: one layer's fp32 working region costs what 2 bytes a
        // parameter of both layers save; HalfGradientPlanTest shows the gain on a deep model)
        long budget = MemoryPlan.of(GptConfig.TINY, 24, 16, Recompute.NONE, 0, 1, DType.BF16, DType.BF16).total();
        int both = MemoryPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, 0, 1, DType.BF16, DType.BF16, budget,
                1024);
        assertThat(both).isEqualTo(24);
        Path dir = tmp.resolve("bf16");
        Result r = run(quick(dir, concat(QUIET, "--precision", "bf16", "--grad-storage", "bf16", "--find-batch-size",
                "--memory-budget", Long.toString(budget))));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("recompute none, saved activations in bf16, gradients in bf16: at most " + both
                + " sequences of 16 tokens fit; using --batch " + both).contains("as planned")
                .contains("gradients stored in bf16");
        assertThat(trainLosses(dir)).hasSize(3);
    }

    @Test
    void findBatchSizePlansZeroOneWithSixteenBitGradients() throws IOException {
        // ZeRO-1 over 2 ranks: AdamW's moments halved, the 16-bit gradients whole; a budget of exactly 20 sequences
        long budget = MemoryPlan.of(GptConfig.TINY, 20, 16, Recompute.NONE, 1, 2, DType.BF16, DType.BF16).total();
        assertThat(MemoryPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, 1, 2, DType.BF16, DType.BF16, budget,
                1024)).isEqualTo(20);
        Path dir = tmp.resolve("zero1-fit");
        Result r = run(quick(dir, concat(QUIET, "--precision", "bf16", "--grad-storage", "bf16", "--ranks", "2",
                "--zero", "1", "--find-batch-size", "--memory-budget", Long.toString(budget))));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("gradients in bf16: at most 20 sequences of 16 tokens fit").contains("as planned")
                .contains("ZeRO-1 over 2 ranks");
        assertThat(trainLosses(dir)).hasSize(3);
    }

    @Test
    void fp16GradientsTrainWithLossScalingOverTwoRanks() throws IOException {
        Path dir = tmp.resolve("fp16");
        Result r = run(quick(dir, concat(QUIET, "--precision", "fp16", "--grad-storage", "fp16", "--ranks", "2")));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("gradients stored in fp16");
        assertThat(trainLosses(dir)).hasSize(3);
    }

    @Test
    void aResumeContinuesBitForBitAndMaySwitchTheStorage() throws IOException {
        String[] common = {"--steps", "4", "--val-every", "0", "--save-every", "2", "--samples", "0",
            "--eval-problems", "0", "--precision", "bf16"};
        Path whole = tmp.resolve("whole"), split = tmp.resolve("split"), switched = tmp.resolve("switched");
        Result a = run(quick(whole, concat(common, "--grad-storage", "bf16")));
        assertThat(a.code()).as(a.err()).isZero();
        for (Path dir : new Path[] {split, switched}) {
            String[] half = quick(dir, concat(common, "--grad-storage", "bf16"));
            half[java.util.Arrays.asList(half).indexOf("--steps") + 1] = "2";
            Result b = run(half);
            assertThat(b.code()).as(b.err()).isZero();
        }
        // the checkpoint holds the parameters and AdamW's moments: the gradients start from zero every step
        Result c = run("train", "--resume", split.toString(), "--steps", "4", "--threads", "2");
        assertThat(c.code()).as(c.err()).isZero();
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin"}) {
            assertThat(java.nio.file.Files.readAllBytes(split.resolve(f))).as(f)
                    .isEqualTo(java.nio.file.Files.readAllBytes(whole.resolve(f)));
        }
        Result d = run("train", "--resume", switched.toString(), "--steps", "4", "--threads", "2", "--grad-storage",
                "fp32");
        assertThat(d.code()).as(d.err()).isZero();
        assertThat(d.out()).doesNotContain("gradients stored in");
        assertThat(trainLosses(switched)).hasSize(4);
    }

    @Test
    void zeroOneResumesBitForBitAndItsCheckpointResumesUnderDdp() throws IOException {
        String[] common = {"--steps", "4", "--val-every", "0", "--save-every", "2", "--samples", "0",
            "--eval-problems", "0", "--precision", "bf16", "--grad-storage", "bf16", "--ranks", "2"};
        Path whole = tmp.resolve("z1-whole"), split = tmp.resolve("z1-split"), ddp = tmp.resolve("z1-ddp"),
                handed = tmp.resolve("z1-handed");
        Result a = run(quick(whole, concat(common, "--zero", "1")));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(a.out()).contains("gradients stored in bf16");
        Result u = run(quick(ddp, common)); // DDP over the same 16-bit gradients: the same bits
        assertThat(u.code()).as(u.err()).isZero();
        for (Path dir : new Path[] {split, handed}) {
            String[] half = quick(dir, concat(common, "--zero", "1"));
            half[java.util.Arrays.asList(half).indexOf("--steps") + 1] = "2";
            Result b = run(half);
            assertThat(b.code()).as(b.err()).isZero();
        }
        Result c = run("train", "--resume", split.toString(), "--steps", "4", "--threads", "2");
        assertThat(c.code()).as(c.err()).isZero();
        Result d = run("train", "--resume", handed.toString(), "--steps", "4", "--threads", "2", "--zero", "0");
        assertThat(d.code()).as(d.err()).isZero();
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin"}) {
            byte[] want = java.nio.file.Files.readAllBytes(whole.resolve(f));
            assertThat(java.nio.file.Files.readAllBytes(split.resolve(f))).as("resumed: %s", f).isEqualTo(want);
            assertThat(java.nio.file.Files.readAllBytes(ddp.resolve(f))).as("DDP: %s", f).isEqualTo(want);
            assertThat(java.nio.file.Files.readAllBytes(handed.resolve(f))).as("resumed under DDP: %s", f)
                    .isEqualTo(want);
        }
    }

    @Test
    void anOffloadedOptimizerTrainsTheSameBitsOverSixteenBitGradients() throws IOException {
        String[] common = concat(QUIET, "--precision", "bf16", "--grad-storage", "bf16");
        Path device = tmp.resolve("on-device"), host = tmp.resolve("offloaded");
        Result a = run(quick(device, common));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = run(quick(host, concat(common, "--offload-optimizer")));
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(b.out()).contains("gradients stored in bf16");
        assertThat(trainLosses(host)).hasSize(3).containsExactlyElementsOf(trainLosses(device));
    }

    @Test
    void whatItDoesNotComposeWithYetExitsTwoNamingBoth() {
        record Case(String message, String[] flags) {}
        for (Case c : List.of(
                new Case("--grad-storage bf16 does not go with --zero 2 yet: drop one of them",
                        new String[] {"--grad-storage", "bf16", "--ranks", "2", "--zero", "2"}),
                new Case("--grad-storage bf16 does not go with --zero 3 yet: drop one of them",
                        new String[] {"--grad-storage", "bf16", "--ranks", "2", "--zero", "3"}),
                new Case("--grad-storage bf16 does not go with --pp yet",
                        new String[] {"--grad-storage", "bf16", "--ranks", "2", "--pp", "2"}),
                new Case("--grad-storage bf16 does not go with --tp yet",
                        new String[] {"--grad-storage", "bf16", "--ranks", "2", "--tp", "2"}),
                new Case("--grad-storage bf16 does not go with --sync async yet",
                        new String[] {"--grad-storage", "bf16", "--ranks", "3", "--sync", "async"}),
                new Case("--grad-storage fp16 needs --precision fp16, whose loss scaling keeps small gradients "
                        + "representable (this run is bf16): use --grad-storage bf16",
                        new String[] {"--grad-storage", "fp16", "--precision", "bf16"}),
                new Case("--bucket-mb does not go with --grad-storage bf16: 16-bit gradients are all-reduced after "
                        + "backward, chunk by chunk, not in buckets; drop --bucket-mb",
                        new String[] {"--grad-storage", "bf16", "--ranks", "2", "--bucket-mb", "1"}),
                new Case("'fp8' is not a gradient storage: fp32, bf16 or fp16",
                        new String[] {"--grad-storage", "fp8"}))) {
            Path dir = tmp.resolve("x");
            Result r = run(quick(dir, concat(QUIET, c.flags())));
            assertThat(r.code()).as("%s: %s", c.message(), r.err()).isEqualTo(2);
            assertThat(r.err()).contains(c.message()).doesNotContain("\tat ");
            assertThat(dir).doesNotExist();
        }
    }
}
