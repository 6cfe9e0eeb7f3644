package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import io.accel4j.train.WidthGoldens;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code accel4j train}'s goldens: every mode's metrics records (every field but the times) and checkpoint files
 * (llm.c's model file and the state file at every saved step), as one digest per vector width. Recorded from the old
 * trainer's path while it ran side by side with the Java API's ({@link LearnerRun}), which gave the same records,
 * the same checkpoint bytes and the same printed lines, and resumed each other's checkpoints (git history: this
 * class as {@code TrainCommandLearnerTest}). Across precisions (fp32, bf16, fp16 with loss scaling, fp8),
 * accumulation, recomputation, 16-bit gradients, bf16 working weights, validation, one rank, DDP (whole and
 * bucketed), ZeRO 1–3, the offloaded optimizer (pipelined and serial) and asynchronous workers (one worker, or
 * several at staleness 0: the runs whose bits do not depend on timing); and resumed runs, which end on the
 * uninterrupted run's digest.
 */
class TrainCommandGoldenTest {

    @TempDir
    Path tmp;

    private static void run(Path dir, String... more) {
        String[] args = Stream.concat(Stream.of("train", "--out", dir.toString(), "--batch", "2", "--seq", "16",
                "--threads", "2", "--val-batches", "2", "--val-every", "2", "--save-every", "2",
                "--samples", "2", "--eval-problems", "3", "--warmup", "2"), Stream.of(more))
                .toArray(String[]::new);
        TrainCommandTest.Result r = TrainCommandTest.run(args);
        assertThat(r.code()).as(r.err() + r.out()).isZero();
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

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "--steps 5 | 5b3e15be088baacf | 6dc6241e1c4582a9",
        "--steps 4 --precision bf16 --grad-accum 2 --recompute gelu | aa47e1f91609f0ed | 5a953e48451f4f43",
        "--steps 4 --precision fp16 --loss-scale 65536 --loss-scale-window 2 | 05178744935bdab8 | 6ba89a6f45561924",
        "--steps 4 --precision fp8 | 0955808785173f27 | b9077a4f85353409",
        "--steps 4 --precision bf16 --grad-storage bf16 --recompute layer | f2376d8736cc9d29 | 5f6fd07135b7e0c2",
        "--steps 4 --offload-optimizer --grad-accum 2 | 8cf04a7e20f5e043 | d1112c5da42cbbff",
        "--steps 4 --offload-optimizer --offload-overlap off --precision fp16 | 0b4bddccf8bac767 | ced76ca62fb1c3fc",
        "--steps 4 --ranks 2 --bucket-mb 0 | 89d246bd224a16f2 | 897125f73446dc65",
        "--steps 4 --ranks 2 --bucket-mb 0.0001 --precision bf16 | 0f88ce23f604765f | 1b1f0518b4d1dc03",
        "--steps 4 --ranks 2 --zero 1 --grad-accum 2 | 6589e6df81157d72 | 7298e6a2fc3e4a97",
        "--steps 4 --ranks 2 --zero 1 --precision bf16 --grad-storage bf16 | 5d91335c1f5e9741 | c12d279a28e872af",
        "--steps 4 --ranks 2 --offload-optimizer --precision bf16 --grad-storage bf16 | 5d91335c1f5e9741 | c12d279a28e872af",
        "--steps 4 --ranks 2 --zero 2 | 67e9305e1ae38fb5 | c08221545fbc9001",
        "--steps 4 --ranks 3 --zero 3 --precision fp16 | ad1bc60ef601d3db | e4d2d9905c3c81c0",
        "--steps 4 --precision bf16 --bf16-params --grad-accum 2 | 8623f3649e0c3af8 | df67b4bf75d389c1",
        "--steps 4 --precision bf16 --bf16-params --offload-optimizer --grad-storage bf16 | f741b51d0015cd33 | ba52c4f47eeeee1e",
        "--steps 4 --ranks 2 --precision bf16 --bf16-params --grad-clip 0.5 | 00f7b88feacdece3 | 56e5d606f3e0bdf6",
        "--steps 4 --ranks 2 --sync async --ps 1 --staleness 1 | 29615e07214105db | 4d0f306d18a4c336",
        "--steps 4 --ranks 3 --sync async --ps 1 --staleness 0 --precision bf16 | 51d1f607187014e7 | 75c31c2fb4df0416"})
    void everyModeTrainsAsTheTrainerDid(String flags, String golden512, String golden256) throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        Path dir = tmp.resolve("run");
        run(dir, flags.split(" "));
        assertThat(checkpoints(dir)).as("checkpoints").isNotEmpty();
        assertThat(digest(dir)).as("the run's metrics and checkpoints").isEqualTo(golden);
    }

    /** The first 16 hex digits of SHA-256 over the metrics records (times left out) and every checkpoint file. */
    private static String digest(Path dir) throws IOException {
        try {
            java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
            for (String r : records(dir)) {
                sha.update((r + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            for (var e : checkpoints(dir).entrySet()) {
                sha.update((e.getKey() + "=" + e.getValue() + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            return java.util.HexFormat.of().formatHex(sha.digest()).substring(0, 16);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }

    /** A run resumed from its checkpoint of step 2 ends on the uninterrupted run's digest (the rows above). */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "--precision fp16 --loss-scale 65536 --loss-scale-window 2 | 05178744935bdab8 | 6ba89a6f45561924",
        "--ranks 2 --zero 1 --precision bf16 | 0f88ce23f604765f | 1b1f0518b4d1dc03"})
    void aResumedRunEndsOnTheUninterruptedRunsBits(String flags, String golden512, String golden256)
            throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        String[] more = flags.split(" ");
        Path dir = tmp.resolve("resumed");
        run(dir, concat(more, "--steps", "2"));
        run(dir, concat(more, "--steps", "4", "--resume", dir.toString()));
        assertThat(digest(dir)).as("the resumed run's metrics and checkpoints").isEqualTo(golden);
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Arrays.stream(a), Arrays.stream(b)).toArray(String[]::new);
    }
}
