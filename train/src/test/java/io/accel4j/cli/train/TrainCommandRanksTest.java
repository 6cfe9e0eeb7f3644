package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.cli.Main;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code accel4j train --ranks N}: in-process data parallelism from the command line. */
class TrainCommandRanksTest {

    /** Per-step train losses of 2 ranks × B vs 1 rank × 2B: the same tokens, sums in another order (~1e-6). */
    private static final double LOSS_REL = 1e-4;

    @TempDir
    Path tmp;

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    private static String[] args(Path dir, String... more) {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--seq", "16", "--threads", "2",
                "--val-every", "0", "--val-batches", "1", "--samples", "0", "--eval-problems", "0"),
                Stream.of(more)).toArray(String[]::new);
    }

    @Test
    void twoRanksTrainLikeOneRankWithTwiceTheBatch() throws IOException {
        Path two = tmp.resolve("two"), one = tmp.resolve("one");
        Result r2 = run(args(two, "--batch", "2", "--ranks", "2", "--data-order", "sequential", "--steps", "3"));
        assertThat(r2.code()).as(r2.err()).isZero();
        assertThat(r2.out()).contains("2 data-parallel ranks", "3 steps of 4 x 16 tokens (1 x 2 sequences on each "
                + "of 2 ranks)", "done: 3 steps");
        assertThat(r2.out().lines().filter(l -> l.startsWith("using ")).count()).as("only rank 0 prints")
                .isEqualTo(1);
        try (Stream<Path> files = Files.list(two)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList()).contains(
                    "checkpoint.properties", "metrics.jsonl", "model_00000003.bin", "state_00000003.bin");
        }
        Result r1 = run(args(one, "--batch", "4", "--data-order", "sequential", "--steps", "3"));
        assertThat(r1.code()).as(r1.err()).isZero();
        List<Double> a = trainLosses(two), b = trainLosses(one);
        assertThat(a).hasSize(3).hasSameSizeAs(b);
        for (int i = 0; i < a.size(); i++) {
            assertThat(a.get(i)).as("train loss of step %d", i).isCloseTo(b.get(i), offset(LOSS_REL * b.get(i)));
        }
    }

    @Test
    void twoRanksResumeBitForBit() throws IOException {
        Path straight = tmp.resolve("straight"), split = tmp.resolve("split");
        String[] common = {"--batch", "2", "--ranks", "2", "--data-order", "shuffled", "--bucket-mb", "0.001"};
        Result a = run(concat(args(straight, common), "--steps", "3"));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = run(concat(args(split, common), "--steps", "2"));
        assertThat(b.code()).as(b.err()).isZero();
        Result r = run(concat(args(split, common), "--steps", "3", "--resume", split.toString()));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("resumed " + split + " at step 2");
        assertThat(trainLosses(split)).containsExactlyElementsOf(trainLosses(straight));
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    @Test
    void zeroTrainsAsPlainDataParallelismAndCheckpointsAcrossStages() throws IOException {
        Path ddp = tmp.resolve("ddp"), zero = tmp.resolve("zero");
        String[] common = {"--batch", "2", "--ranks", "2", "--data-order", "shuffled", "--bucket-mb", "0",
            "--grad-clip", "0"};
        Result a = run(concat(args(ddp, common), "--steps", "3"));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(a.out()).contains("ZeRO-0 over 2 ranks (fp32 model states)");
        Result z = run(concat(args(zero, common), "--steps", "2", "--zero", "2", "--save-every", "1"));
        assertThat(z.code()).as(z.err()).isZero();
        assertThat(z.out()).contains("ZeRO-2 over 2 ranks (fp32 model states): per rank params ",
                "this rank holds");
        Result r = run(concat(args(zero, common), "--steps", "3", "--zero", "3", "--resume", zero.toString()));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("resumed " + zero + " at step 2");
        assertThat(trainLosses(zero)).containsExactlyElementsOf(trainLosses(ddp));
        assertThat(Files.readAllBytes(zero.resolve("model_00000003.bin")))
                .isEqualTo(Files.readAllBytes(ddp.resolve("model_00000003.bin")));
        assertThat(Files.readAllBytes(zero.resolve("state_00000003.bin")))
                .isEqualTo(Files.readAllBytes(ddp.resolve("state_00000003.bin")));
    }

    @Test
    void badZeroFlagsAreUsageErrors() {
        Result r = run("train", "--zero", "1", "--out", tmp.resolve("x").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --zero 1 shards the model states over data-parallel ranks: "
                + "it needs --ranks 2 or more");
        r = run("train", "--zero", "4", "--ranks", "2", "--out", tmp.resolve("x").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --zero must be 0 (plain data parallelism), 1, 2 or 3, got 4");
    }

    @Test
    void badRanksAreAUsageError() {
        Result r = run("train", "--ranks", "0", "--out", tmp.resolve("x").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --ranks must be >= 1, got 0");
    }

    private static List<Double> trainLosses(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().filter(l -> l.contains("train_loss"))
                .map(l -> Double.parseDouble(l.replaceAll("^.*\"train_loss\":([^,]+),.*$", "$1"))).toList();
    }
}
