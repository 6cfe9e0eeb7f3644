package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.run;
import static io.accel4j.cli.train.TrainCommandTest.trainLosses;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.train.checkpoint.CheckpointFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A run's directory across runs (issue 21 items 2, 3, 4 and 9): another run's checkpoint is not replaced without
 * --overwrite, resume restores the run's flags and refuses changed ones, older checkpoints are kept as asked, what an
 * interrupted save or a failed run left is tidied, and the metrics of a resumed run hold each step once.
 */
class TrainCommandRunDirectoryTest {

    @TempDir
    Path tmp;

    /** The tiny model, quick: the flags a run is started with. */
    private static final String[] FLAGS = {"--batch", "2", "--seq", "16", "--threads", "2", "--val-batches", "1",
        "--lr", "3e-3", "--schedule", "constant", "--warmup", "0", "--val-every", "0"};
    /** Flags that may change on resume: no report at the end. */
    private static final String[] QUIET = {"--samples", "0", "--eval-problems", "0"};

    private static String[] args(Object... parts) {
        List<String> a = new ArrayList<>(List.of("train"));
        for (Object p : parts) {
            if (p instanceof String[] many) {
                a.addAll(List.of(many));
            } else {
                a.add(p.toString());
            }
        }
        return a.toArray(String[]::new);
    }

    private static List<String> names(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void anotherRunsCheckpointOrMetricsAreNotReplacedWithoutOverwrite() throws IOException {
        Path dir = tmp.resolve("r");
        assertThat(run(args("--out", dir, "--steps", "2", FLAGS, QUIET)).code()).isZero();
        byte[] model = Files.readAllBytes(dir.resolve("model_00000002.bin"));
        byte[] metrics = Files.readAllBytes(dir.resolve("metrics.jsonl"));

        Result again = run(args("--out", dir, "--steps", "1", FLAGS, QUIET));
        assertThat(again.code()).isEqualTo(2);
        assertThat(again.err().lines().toList()).containsExactly("accel4j: error: --out " + dir + " holds the "
                + "checkpoint of another run (step 2): continue it with --resume " + dir + ", start over there with "
                + "--overwrite, or choose another --out (see 'accel4j train --help')");
        assertThat(Files.readAllBytes(dir.resolve("model_00000002.bin"))).isEqualTo(model);
        assertThat(Files.readAllBytes(dir.resolve("metrics.jsonl"))).isEqualTo(metrics);

        Path foreign = tmp.resolve("notes.jsonl");
        Files.writeString(foreign, "{\"mine\":1}\n");
        Result m = run(args("--out", tmp.resolve("other"), "--metrics-out", foreign, "--steps", "1", FLAGS, QUIET));
        assertThat(m.code()).isEqualTo(2);
        assertThat(m.err()).contains("--metrics-out " + foreign + " exists (11 bytes)", "--overwrite");
        assertThat(Files.readString(foreign)).isEqualTo("{\"mine\":1}\n");
        assertThat(tmp.resolve("other")).doesNotExist();

        Result over = run(args("--out", dir, "--steps", "1", "--overwrite", FLAGS, QUIET));
        assertThat(over.code()).as(over.err()).isZero();
        assertThat(over.out()).contains("--overwrite: removed the checkpoint (step 2) of the run that was in " + dir);
        assertThat(names(dir)).contains("model_00000001.bin").doesNotContain("model_00000002.bin");
        assertThat(Files.readAllLines(dir.resolve("metrics.jsonl"))).as("step 0 and the final validation").hasSize(2);
    }

    /**
     * The README's sequence: a run with its flags, then {@code --resume DIR --steps N} alone continues it with them,
     * bit for bit as one run of N steps; a flag that matters given with another value is refused, naming both.
     */
    @Test
    void resumeRestoresTheRunsFlagsAndRefusesChangedOnes() throws IOException {
        Path straight = tmp.resolve("straight"), split = tmp.resolve("split");
        assertThat(run(args("--out", straight, "--steps", "5", FLAGS, QUIET)).code()).isZero();
        assertThat(run(args("--out", split, "--steps", "3", FLAGS, QUIET)).code()).isZero();
        assertThat(Files.readString(split.resolve(RunConfig.FILE))).contains("--lr=3e-3", "--batch=2",
                "--schedule=constant").doesNotContain("--out");

        Result changed = run("train", "--resume", split.toString(), "--steps", "5", "--lr", "1e-3");
        assertThat(changed.code()).isEqualTo(2);
        assertThat(changed.err().lines().toList()).singleElement().asString().startsWith("accel4j: error: --lr 1e-3 "
                + "differs from the resumed run's --lr 3e-3 (" + split.resolve(RunConfig.FILE) + "): a resumed run "
                + "keeps the flags that change what it trains; omit --lr (only --steps, ");
        Result added = run("train", "--resume", split.toString(), "--steps", "5", "--train-data",
                split.resolve("train.bin").toString());
        assertThat(added.code()).isEqualTo(2);
        assertThat(added.err()).contains("--train-data was not given to the resumed run");

        // the same value spelled another way is the same flag
        Result resumed = run("train", "--resume", split.toString(), "--steps", "5", "--lr", "0.003", "--samples",
                "0", "--eval-problems", "0");
        assertThat(resumed.code()).as(resumed.err()).isZero();
        assertThat(resumed.out()).contains("resumed " + split + " at step 3", "is already in");
        assertThat(trainLosses(split)).containsExactlyElementsOf(trainLosses(straight));
    }

    @Test
    void olderCheckpointsAreKeptAsAskedAndResumeTidiesWhatACrashLeft() throws IOException {
        Path dir = tmp.resolve("keep");
        Result r = run(args("--out", dir, "--steps", "4", "--save-every", "1", "--keep-checkpoints", "2",
                "--save-every-keep", "2", FLAGS, QUIET));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(names(dir)).containsExactly(CheckpointFiles.POINTER,
                "loss.png", "metrics.jsonl", "model_00000002.bin", "model_00000003.bin", "model_00000004.bin",
                RunConfig.FILE, "state_00000002.bin", "state_00000003.bin", "state_00000004.bin", "train.bin",
                "val.bin");

        // a kill -9 in a save of step 6 after the run got to step 5 (records 4 and 5 written, checkpoint 4 the
        // latest): its temporary files and the records after the checkpoint
        Files.writeString(dir.resolve(".model_00000006.bin.3f2a9c.tmp"), "partial");
        Files.writeString(dir.resolve(".checkpoint.properties.77e1.tmp"), "partial");
        Files.writeString(dir.resolve(".train.bin.0badc0de.tmp"), "partial");
        Files.writeString(dir.resolve(".loss.png.tmp"), "partial");
        Path metrics = dir.resolve("metrics.jsonl");
        List<String> lines = new ArrayList<>(Files.readAllLines(metrics));
        lines.add(lines.get(3).replace("{\"step\":3,", "{\"step\":4,"));
        lines.add(lines.get(3).replace("{\"step\":3,", "{\"step\":5,"));
        Files.write(metrics, lines);
        FileTime trainTime = Files.getLastModifiedTime(dir.resolve("train.bin"));

        Result resumed = run(args("--resume", dir, "--steps", "6", QUIET));
        assertThat(resumed.code()).as(resumed.err()).isZero();
        assertThat(resumed.out()).contains("removed 4 temporary files an interrupted save left in " + dir
                + ": .checkpoint.properties.77e1.tmp, .loss.png.tmp, .model_00000006.bin.3f2a9c.tmp, "
                + ".train.bin.0badc0de.tmp");
        assertThat(names(dir)).noneMatch(n -> n.endsWith(".tmp"));
        assertThat(Files.readAllLines(metrics).stream().map(l -> l.replaceAll("^\\{\"step\":(\\d+),.*", "$1"))
                .toList()).as("each step once").containsExactly("0", "1", "2", "3", "4", "5", "6");
        assertThat(Files.getLastModifiedTime(dir.resolve("train.bin"))).as("the generated data is reused")
                .isEqualTo(trainTime);
        assertThat(names(dir)).contains("model_00000004.bin", "model_00000005.bin", "model_00000006.bin");
    }

    @Test
    void aRunThatFailsBeforeItsFirstCheckpointLeavesNothingBehind() throws IOException {
        Path garbage = tmp.resolve("garbage.bin");
        Files.writeString(garbage, "not a token file at all, not even its header");
        Path dir = tmp.resolve("new");
        Result r = run(args("--out", dir, "--steps", "2", "--val-data", garbage, FLAGS, QUIET));
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).singleElement().asString().startsWith("accel4j: error: " + garbage
                + ": ");
        assertThat(dir).as("the run directory it created, with the dataset it generated").doesNotExist();
    }
}
