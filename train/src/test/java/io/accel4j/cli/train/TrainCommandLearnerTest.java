package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code accel4j train} on the Java API ({@link LearnerRun}) against the same command on {@code Trainer}
 * ({@link RankRun}), side by side, before the trainer goes: the same metrics records (every field but the times),
 * the same checkpoint files byte for byte (llm.c's model file and the trainer's state file at every saved step), the
 * same printed lines but for the times and speeds, and each path resumes the other's checkpoint onto the same bits.
 * Across precisions (fp32, bf16, fp16 with loss scaling, fp8), accumulation, recomputation, 16-bit gradients,
 * validation, one rank, DDP (whole and bucketed), ZeRO 1–3, the offloaded optimizer and asynchronous workers (one
 * worker, or several at staleness 0: the runs whose bits do not depend on timing).
 */
class TrainCommandLearnerTest {

    @TempDir
    Path tmp;

    @AfterEach
    void learnerAgain() {
        TrainCommand.viaTrainer = false;
    }

    private static TrainCommandTest.Result run(boolean trainer, Path dir, String... more) {
        TrainCommand.viaTrainer = trainer;
        try {
            String[] args = Stream.concat(Stream.of("train", "--out", dir.toString(), "--batch", "2", "--seq", "16",
                    "--threads", "2", "--val-batches", "2", "--val-every", "2", "--save-every", "2",
                    "--samples", "2", "--eval-problems", "3", "--warmup", "2"), Stream.of(more))
                    .toArray(String[]::new);
            TrainCommandTest.Result r = TrainCommandTest.run(args);
            assertThat(r.code()).as((trainer ? "trainer: " : "learner: ") + r.err() + r.out()).isZero();
            return r;
        } finally {
            TrainCommand.viaTrainer = false;
        }
    }

    /** The metrics records without their times (step_ms, tokens_per_s, data_ms). */
    private static List<String> records(Path dir) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("metrics.jsonl"))) {
            out.add(line.replaceAll(",\"(step_ms|tokens_per_s|data_ms)\":[^,}]*", ""));
        }
        return out;
    }

    /** Every checkpoint file's bytes by name (model_*, state_*). */
    private static TreeMap<String, String> checkpoints(Path dir) throws IOException {
        TreeMap<String, String> files = new TreeMap<>();
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                String name = p.getFileName().toString();
                if (name.startsWith("model_") || name.startsWith("state_")) {
                    files.put(name, Arrays.toString(java.security.MessageDigest.getInstance("SHA-256")
                            .digest(Files.readAllBytes(p))));
                }
            }
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
        return files;
    }

    /** The printed lines but for times, speeds and the run's own paths. */
    private static List<String> lines(String out, Path dir) {
        List<String> kept = new ArrayList<>();
        for (String line : out.replace(dir.toString(), "DIR").split("\n")) {
            kept.add(line.replaceAll(" *[0-9,.]+ (tok/s|tokens/s|ms|s)\\b", " T $1")
                    .replaceAll("\\b\\d+:\\d\\d(:\\d\\d)?\\b", "CLOCK")
                    .replaceAll("(left|eta|in) [0-9hms:. ]+", "$1 CLOCK"));
        }
        return kept;
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "--steps 5",
        "--steps 4 --precision bf16 --grad-accum 2 --recompute gelu",
        "--steps 4 --precision fp16 --loss-scale 65536 --loss-scale-window 2",
        "--steps 4 --precision fp8",
        "--steps 4 --precision bf16 --grad-storage bf16 --recompute layer",
        "--steps 4 --offload-optimizer --grad-accum 2",
        "--steps 4 --offload-optimizer --offload-overlap off --precision fp16",
        "--steps 4 --ranks 2 --bucket-mb 0",
        "--steps 4 --ranks 2 --bucket-mb 0.0001 --precision bf16",
        "--steps 4 --ranks 2 --zero 1 --grad-accum 2",
        "--steps 4 --ranks 2 --zero 1 --precision bf16 --grad-storage bf16",
        "--steps 4 --ranks 2 --offload-optimizer --precision bf16 --grad-storage bf16",
        "--steps 4 --ranks 2 --zero 2",
        "--steps 4 --ranks 3 --zero 3 --precision fp16",
        "--steps 4 --ranks 2 --sync async --ps 1 --staleness 1",
        "--steps 4 --ranks 3 --sync async --ps 1 --staleness 0 --precision bf16"})
    void theLearnerRunsTheCommandAsTheTrainer(String flags) throws IOException {
        String[] more = flags.split(" ");
        Path old = tmp.resolve("trainer"), now = tmp.resolve("learner");
        TrainCommandTest.Result a = run(true, old, more);
        TrainCommandTest.Result b = run(false, now, more);
        assertThat(records(now)).as("metrics").isEqualTo(records(old));
        assertThat(checkpoints(now)).as("checkpoints").isEqualTo(checkpoints(old)).isNotEmpty();
        assertThat(lines(b.out(), now)).as("output").isEqualTo(lines(a.out(), old));
    }

    /** Each path resumes the other's checkpoint of step 2 and ends on the same bits as the trainer resuming its own. */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "--precision fp16 --loss-scale 65536 --loss-scale-window 2",
        "--ranks 2 --zero 1 --precision bf16"})
    void eachResumesTheOthersCheckpoint(String flags) throws IOException {
        String[] more = flags.split(" ");
        Path base = tmp.resolve("base");
        run(true, base, concat(more, "--steps", "2"));
        Path viaTrainer = copy(base, tmp.resolve("t")), viaLearner = copy(base, tmp.resolve("l"));
        run(true, viaTrainer, concat(more, "--steps", "4", "--resume", viaTrainer.toString()));
        run(false, viaLearner, concat(more, "--steps", "4", "--resume", viaLearner.toString()));
        assertThat(records(viaLearner)).isEqualTo(records(viaTrainer));
        assertThat(checkpoints(viaLearner)).isEqualTo(checkpoints(viaTrainer));

        Path learnerBase = tmp.resolve("lbase");
        run(false, learnerBase, concat(more, "--steps", "2"));
        Path back = copy(learnerBase, tmp.resolve("b"));
        run(true, back, concat(more, "--steps", "4", "--resume", back.toString()));
        assertThat(checkpoints(back)).isEqualTo(checkpoints(viaTrainer));
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Arrays.stream(a), Arrays.stream(b)).toArray(String[]::new);
    }

    private static Path copy(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(from)) {
            for (Path p : s.toList()) {
                Files.copy(p, to.resolve(p.getFileName()));
            }
        }
        return to;
    }
}
