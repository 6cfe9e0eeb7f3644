package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.train.checkpoint.CheckpointFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code accel4j train}'s messages for bad input (issue 21 items 5 to 8): each one line naming the flag, file or field
 * and the problem, usage errors exit 2, runtime failures exit 1, no stack trace. All but one fail before training.
 */
class TrainCommandMessagesTest {

    @TempDir
    Path tmp;

    private static final String HELP = " (see 'accel4j train --help')";

    /** Each validation of {@code train}'s flags once: the arguments, then the whole error line. */
    @Test
    void everyFlagValidationNamesItsFlag() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("adir"));
        String out = tmp.resolve("x").toString();
        String[][] cases = {
            {"--steps", "0", "--steps must be >= 1, got 0"},
            {"--batch", "0", "--batch must be >= 1, got 0"},
            {"--seq", "0", "--seq must be >= 1, got 0"},
            {"--grad-accum", "0", "--grad-accum must be >= 1, got 0"},
            {"--warmup", "-1", "--warmup must be >= 0, got -1"},
            {"--val-every", "-1", "--val-every must be >= 0, got -1"},
            {"--save-every", "-1", "--save-every must be >= 0, got -1"},
            {"--val-every", "5", "--val-batches", "0", "--val-batches must be >= 1 when validating (--val-every 5)"},
            {"--lr", "0", "--lr must be finite and > 0, got 0.0"},
            {"--min-lr-fraction", "2", "--min-lr-fraction must be in [0, 1], got 2.0"},
            {"--grad-clip", "-1", "--grad-clip must be finite and >= 0 (0: off), got -1.0"},
            {"--seed", "-1", "--seed must be in [0, 4294967295] (the Mersenne Twister's seed), got -1"},
            {"--seed", "4294967296", "--seed must be in [0, 4294967295] (the Mersenne Twister's seed), got 4294967296"},
            {"--threads", "0", "--threads must be >= 1, got 0"},
            {"--ranks", "0", "--ranks must be >= 1, got 0"},
            {"--zero", "4", "--zero must be 0 (plain data parallelism), 1, 2 or 3, got 4"},
            {"--bucket-mb", "-1", "--bucket-mb must be finite and >= 0, got -1.0"},
            {"--keep-checkpoints", "0", "--keep-checkpoints must be >= 1 (the latest checkpoint is always kept), got 0"},
            {"--save-every-keep", "-2", "--save-every-keep must be >= 0 (0: none), got -2"},
            {"--samples", "-1", "--samples and --eval-problems must be >= 0, got -1 and 200"},
            {"--zero", "1", "--zero 1 shards the model states over data-parallel ranks: it needs --ranks 2 or more, "
                    + "or mpirun -np 2 or more"},
            {"--seq", "65", "--seq 65 is longer than the model's max_seq_len 64"},
            {"--model", "nosuch", "--model nosuch is neither a preset (" + String.join(", ",
                    io.accel4j.train.model.GptConfig.presetNames()) + ") nor an existing file"},
            {"--model", dir.toString(), "--model " + dir + " is a directory, not an llm.c model file (to continue a "
                    + "run directory, use --resume)"},
            {"--train-data", tmp.resolve("no.bin").toString(), "--train-data " + tmp.resolve("no.bin")
                    + " does not exist"},
            {"--train-data", dir.toString(), "--train-data " + dir + " is a directory, not a token file (e.g. "
                    + "DIR/train.bin from 'accel4j prepare')"},
            {"--val-data", tmp.resolve("no.bin").toString(), "--val-data " + tmp.resolve("no.bin")
                    + " does not exist"},
            {"--resume", tmp.resolve("none").toString(), "--resume " + tmp.resolve("none") + " does not exist: give "
                    + "the run directory of the run to continue"},
            {"--resume", dir.toString(), "--overwrite", "--overwrite starts a new run: it does not go with --resume"},
        };
        for (String[] c : cases) {
            String[] args = new String[c.length + 2];
            args[0] = "train";
            args[1] = "--out";
            args[2] = out;
            System.arraycopy(c, 0, args, 3, c.length - 1);
            Result r = run(args);
            assertThat(r.code()).as("%s: %s", List.of(c), r.err()).isEqualTo(2);
            assertThat(r.err().lines().toList()).as(List.of(c).toString())
                    .containsExactly("accel4j: error: " + c[c.length - 1] + HELP);
        }
    }

    @Test
    void configFieldNamesBecomeFlagsWordByWord() {
        assertThat(ConfigFlags.flagNames("steps must be >= 1, got 0")).isEqualTo("--steps must be >= 1, got 0");
        assertThat(ConfigFlags.flagNames("eps must be > 0")).isEqualTo("--eps must be > 0");
        assertThat(ConfigFlags.flagNames("valBatches must be >= 1 when validating (valEvery 5)"))
                .isEqualTo("--val-batches must be >= 1 when validating (--val-every 5)");
        assertThat(ConfigFlags.flagNames("--batch is fine, batches and seqs are words")).isEqualTo(
                "--batch is fine, batches and seqs are words");
    }

    @Test
    void helpTextsSayWhatTheCodeDoes() {
        Result top = run("--help");
        assertThat(top.out()).doesNotContain("on the way").contains("CUDA");
        Result train = run("train", "--help");
        assertThat(train.out().replaceAll("\\s+", " ")).contains("any --precision").doesNotContain("fp32: device 0")
                .contains("--keep-checkpoints").contains("--overwrite").contains("which may change");
    }

    /** A corrupt pointer file or one leaving the run directory is refused, naming the field (items 6 and 8). */
    @Test
    void aCorruptOrEscapingCheckpointPointerNamesItsField() throws IOException {
        Path run = Files.createDirectories(tmp.resolve("run"));
        Path elsewhere = Files.createDirectories(tmp.resolve("elsewhere"));
        Files.writeString(elsewhere.resolve("model.bin"), "not read");
        Files.writeString(run.resolve("model_00000004.bin"), "m");
        Files.writeString(run.resolve("state_00000004.bin"), "s");
        Path pointer = run.resolve(CheckpointFiles.POINTER);
        String[][] cases = {
            {"", "step is missing: the file is corrupt"},
            {"step=abc\nmodel=model_00000004.bin\nstate=state_00000004.bin\n", "step is 'abc', not a step number "
                    + "(>= 0): the file is corrupt"},
            {"step=4\nstate=state_00000004.bin\n", "model is missing: the file is corrupt"},
            {"step=4\nmodel=../elsewhere/model.bin\nstate=state_00000004.bin\n", "model is '../elsewhere/model.bin',"
                    + " not a file name in the run directory " + run + ": the file is corrupt or was edited"},
            {"step=4\nmodel=" + elsewhere.resolve("model.bin") + "\nstate=state_00000004.bin\n", "model is '"
                    + elsewhere.resolve("model.bin") + "', not a file name in the run directory " + run},
            {"step=4\nmodel=..\nstate=state_00000004.bin\n", "model is '..', not a file name"},
            {"step=4\nmodel=model_00000004.bin\nstate=state_00000009.bin\n", "state names state_00000009.bin, which "
                    + "is missing in " + run + ": the checkpoint is incomplete"},
            {"step=4\nmodel=model_\\u12\n", "contents are not a properties file"},
        };
        for (String[] c : cases) {
            Files.writeString(pointer, c[0]);
            Result r = run("train", "--resume", run.toString(), "--steps", "5");
            assertThat(r.code()).as(c[0] + ": " + r.err()).isEqualTo(1);
            assertThat(r.err().lines().toList()).as(c[0]).singleElement().asString()
                    .startsWith("accel4j: error: cannot resume " + run + ": " + pointer + ": " + c[1])
                    .doesNotContain("Exception");
        }
    }

    /**
     * A checkpoint that cannot be written names the step, the problem and the last complete checkpoint (a directory
     * where the model file goes stands for a full disk, which a test cannot make); the threads asked beyond the
     * processors are capped with a warning.
     */
    @Test
    void aFailedSaveNamesTheStepAndTheLastCompleteCheckpoint() throws IOException {
        Path dir = tmp.resolve("full");
        Files.createDirectories(dir.resolve("model_00000002.bin"));
        Files.writeString(dir.resolve("model_00000002.bin/keep.txt"), "a directory in the way");
        Result r = run("train", "--out", dir.toString(), "--batch", "2", "--seq", "16", "--val-batches", "1",
                "--steps", "2", "--save-every", "1", "--val-every", "0", "--samples", "0", "--eval-problems", "0",
                "--threads", "100000");
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        int cores = Runtime.getRuntime().availableProcessors();
        assertThat(r.err().lines().toList()).containsExactly(
                "accel4j: warning: --threads 100000 is more than the " + cores + " processor" + (cores == 1 ? "" : "s")
                        + " available: using " + cores,
                "accel4j: error: cannot write the checkpoint of step 2 in " + dir + ": " + dir.resolve(
                        "model_00000002.bin") + ": is a directory; the last complete checkpoint is step 1 (--resume "
                        + dir + " continues from it)");
        assertThat(CheckpointFiles.latest(dir).model()).isEqualTo(dir.resolve("model_00000001.bin"));
    }
}
