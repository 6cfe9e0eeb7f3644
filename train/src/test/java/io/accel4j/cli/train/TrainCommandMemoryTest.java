package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static io.accel4j.cli.train.TrainCommandTest.trainLosses;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code train --recompute} and {@code --find-batch-size}. */
class TrainCommandMemoryTest {

    private static final String[] QUIET = {"--steps", "3", "--val-every", "0", "--samples", "0",
        "--eval-problems", "0"};

    @TempDir
    Path tmp;

    @Test
    void recomputationGivesTheSameLosses() throws IOException {
        Result none = run(quick(tmp.resolve("none"), QUIET));
        assertThat(none.code()).as(none.err()).isZero();
        for (String mode : new String[] {"gelu", "LAYER"}) {
            Result r = run(quick(tmp.resolve(mode), concat(QUIET, "--recompute", mode)));
            assertThat(r.code()).as(r.err()).isZero();
            assertThat(r.out()).contains("recompute " + mode.toLowerCase());
            assertThat(trainLosses(tmp.resolve(mode))).hasSize(3).containsExactlyElementsOf(
                    trainLosses(tmp.resolve("none")));
        }
    }

    @Test
    void theBatchSizeIsFoundFromTheBudgetAndTheGlobalBatchSplitToFit() throws IOException {
        // the tiny preset at T = 16: a budget that fits exactly 4 sequences, a global batch of 6
        long budget = MemoryPlan.of(GptConfig.TINY, 4, 16, Recompute.NONE).total();
        Path dir = tmp.resolve("find");
        Result r = run(quick(dir, concat(QUIET, "--find-batch-size", "--memory-budget", Long.toString(budget),
                "--global-batch", "6")));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("at most 4 sequences of 16 tokens fit; using --batch 3 --grad-accum 2")
                .contains("trial step at --batch 3: ").contains("as planned")
                .contains("3 steps of 6 x 16 tokens (2 micro-batches)");
        assertThat(trainLosses(dir)).hasSize(3);
    }

    @Test
    void badMemoryFlagsAreUsageErrors() {
        for (String[] args : new String[][] {
            {"--find-batch-size"}, {"--memory-budget", "1g"}, {"--find-batch-size", "--memory-budget", "lots"},
            {"--find-batch-size", "--memory-budget", "1k"}, {"--recompute", "some"},
            {"--find-batch-size", "--memory-budget", "1g", "--global-batch", "0"}}) {
            Result r = run(quick(tmp.resolve("bad"), args));
            assertThat(r.code()).as("%s: %s", List.of(args), r.err()).isEqualTo(2);
            assertThat(r.err()).startsWith("accel4j: error: ");
        }
        Result r = run(quick(tmp.resolve("bad"), "--find-batch-size", "--memory-budget", "1k"));
        assertThat(r.err()).contains("not even one sequence of 16 tokens fits the memory budget of 1024 bytes");
    }

    @Test
    void sizesParseWithBinaryUnits() {
        assertThat(MemoryOptions.parseBytes("123")).isEqualTo(123);
        assertThat(MemoryOptions.parseBytes("64k")).isEqualTo(64 << 10);
        assertThat(MemoryOptions.parseBytes("512M")).isEqualTo(512L << 20);
        assertThat(MemoryOptions.parseBytes("1.5g")).isEqualTo(3L << 29);
        assertThat(MemoryOptions.parseBytes("2GiB")).isEqualTo(2L << 30);
        assertThat(MemoryOptions.parseBytes(" 3gb ")).isEqualTo(3L << 30);
        for (String bad : new String[] {"", "g", "-1", "0", "1.2.3", "5x", "0.1"}) {
            assertThatThrownBy(() -> MemoryOptions.parseBytes(bad)).as(bad)
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }

    private static String[] concat(String[] a, String... b) {
        return java.util.stream.Stream.concat(java.util.stream.Stream.of(a), java.util.stream.Stream.of(b))
                .toArray(String[]::new);
    }

    /**
     * Inputs whose memory plan is more than any machine has are refused in one line before anything is allocated or
     * written (they ended in an OutOfMemoryError with a stack trace): a huge batch, a huge model file.
     */
    @Test
    void aPlanLargerThanMemoryIsRefusedInOneLine() throws IOException {
        Path dir = tmp.resolve("big");
        Result r = run("train", "--out", dir.toString(), "--batch", "10000000", "--steps", "1");
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        assertThat(r.err().lines().toList()).singleElement().asString().startsWith("accel4j: error: this run at "
                + "--batch 10000000 --seq 64 needs ").contains("(parameters ", ", activations ", " available; try "
                + "a smaller --batch or --seq");
        assertThat(dir).doesNotExist();

        Path huge = io.accel4j.cli.HugeModelFile.write(tmp.resolve("huge.bin"));
        r = run("train", "--out", dir.toString(), "--model", huge.toString(), "--steps", "1", "--batch", "1");
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        assertThat(r.err().lines().toList()).singleElement().asString().startsWith("accel4j: error: this run at "
                + "--batch 1 --seq 64 needs ").contains("(parameters 286.", "AdamW state 572.",
                "the model file read 286.");
        assertThat(dir).doesNotExist();
    }

    @Test
    void theRefusalAddsThePartsAndNamesTheLimit() {
        var parts = List.of(new io.accel4j.cli.MemoryCheck.Part("parameters", 3L << 30),
                new io.accel4j.cli.MemoryCheck.Part("none", 0), new io.accel4j.cli.MemoryCheck.Part("activations",
                        1L << 29));
        assertThatThrownBy(() -> io.accel4j.cli.MemoryCheckAccess.require(parts, 2L << 30)).hasMessage("x needs "
                + "3.5 GiB (parameters 3.0 GiB, activations 512.0 MiB), this machine has 2.0 GiB available; try y");
        io.accel4j.cli.MemoryCheckAccess.require(parts, 4L << 30); // fits
        assertThatThrownBy(() -> io.accel4j.cli.MemoryCheckAccess.require(List.of(
                new io.accel4j.cli.MemoryCheck.Part("a", Long.MAX_VALUE), new io.accel4j.cli.MemoryCheck.Part("b",
                        Long.MAX_VALUE)), Long.MAX_VALUE)).hasMessageStartingWith("x needs more than 8 EiB");
    }

    @Test
    void aRankLargerThanItsGpuIsRefused() {
        var gpu = new io.accel4j.cuda.CudaProbe.Ready("Test GPU", 90, 132, 1L << 30, 13000, 1, "libcuda.so.1");
        var cfg = io.accel4j.train.TrainConfig.builder().batch(64).seq(1024).build();
        var parts = List.of(new io.accel4j.cli.MemoryCheck.Part("activations", 2L << 30));
        assertThatThrownBy(() -> MemoryOptions.checkGpu(parts, cfg, gpu)).hasMessage("each rank at --batch 64 "
                + "--seq 1024 on the GPU needs 2.0 GiB (activations 2.0 GiB), GPU 0 (Test GPU) has 1.0 GiB in all; "
                + "try a smaller --batch or --seq, --recompute layer, --find-batch-size --memory-budget SIZE, or a "
                + "smaller model");
        MemoryOptions.checkGpu(List.of(new io.accel4j.cli.MemoryCheck.Part("activations", 1L << 29)), cfg, gpu);
    }
}
