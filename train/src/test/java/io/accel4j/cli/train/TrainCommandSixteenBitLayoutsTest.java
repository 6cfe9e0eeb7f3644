package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --tp T} / {@code --pp P} / {@code --tp T --pp P} with {@code --precision bf16|fp16}: the saved
 * activations in 16 bits, planned (the tensor plan equal to what the Learner allocates; the stage plans printed with
 * their shared fp32 working set), trained end to end ({@code --pp 2 --precision bf16} as the trainer's
 * {@code --grad-accum 2 --precision bf16}: the same rounding points), and what the split paths do not take refused.
 */
class TrainCommandSixteenBitLayoutsTest {

    @TempDir
    Path tmp;

    private Path tokens() throws IOException {
        int[] t = new int[4000];
        for (int i = 0; i < t.length; i++) {
            t[i] = "12+34=46\n".charAt(i % 9);
        }
        Path p = tmp.resolve("train.bin");
        TokenFile.write(p, t);
        return p;
    }

    private String[] tp(Path dir, String... more) throws IOException {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--train-data", tokens().toString(),
                "--seq", "16", "--threads", "2", "--val-every", "0", "--samples", "0", "--eval-problems", "0",
                "--warmup", "2"), Stream.of(more)).toArray(String[]::new);
    }

    @Test
    void theTensorPlanInSixteenBitsIsWhatTheLearnerAllocates() throws IOException {
        GptConfig model = GptConfig.preset("tiny");
        try (TokenFile train = TokenFile.open(tokens())) {
            for (int[] layout : new int[][] {{2, 2, 0}, {4, 2, 1}}) {
                for (DType d : new DType[] {DType.BF16, DType.FP16}) {
                    TrainConfig cfg = TrainConfig.builder().precision(Precision.of(d)).batch(2).seq(16).steps(1)
                            .zeroStage(layout[2]).build();
                    TensorParallelPlan plan = TensorParallelPlan.of(model, cfg, layout[1], layout[0]);
                    TensorParallelPlan full = TensorParallelPlan.of(model, TrainConfig.builder()
                            .precision(Precision.FP32).batch(2).seq(16).steps(1).zeroStage(layout[2]).build(),
                            layout[1], layout[0]);
                    try (Learner l = TensorParallelRun.learner(model, cfg, layout[1], layout[0], null, 2, train)
                            .build()) {
                        assertThat(l.describe()).contains(d + " matmul operands, saved activations in " + d);
                        assertThat(plan.activations()).isEqualTo(l.network().activationBytes());
                        assertThat(plan.parameters()).isEqualTo(l.network().parameterBytes());
                        assertThat(plan.optimizerState()).isEqualTo(l.optimizerStateBytes());
                    }
                    assertThat(plan.activations()).as("%s at tp %d", d, layout[1]).isLessThan(full.activations());
                    assertThat(plan.parameters()).isEqualTo(full.parameters());
                }
            }
        }
    }

    @Test
    void tp2InBf16TrainsAndPrintsItsPlan() throws IOException {
        Path dir = tmp.resolve("tp2");
        Result r = TrainCommandTest.run(tp(dir, "--tp", "2", "--ranks", "2", "--batch", "2", "--steps", "3",
                "--precision", "bf16"));
        assertThat(r.code()).as(r.err()).isZero();
        TrainConfig cfg = TrainConfig.builder().precision(Precision.of(DType.BF16)).batch(2).seq(16).steps(3)
                .build();
        TensorParallelPlan plan = TensorParallelPlan.of(GptConfig.preset("tiny"), cfg, 2, 2);
        assertThat(r.out()).contains("saved activations in BF16", "done: 3 steps", String.format(Locale.ROOT,
                "activations %.1f MiB; %.1f MiB in all", plan.activations() / 1048576.0, plan.total() / 1048576.0));
        assertThat(losses(dir)).hasSize(3).allMatch(Double::isFinite);
    }

    /**
     * {@code --pp 2 --micro-batches 2 --precision bf16} against {@code --grad-accum 2 --precision bf16}: under 1F1B
     * the last stage's top block reads its fp32 values and every other block its 16-bit copy, as on one rank, so
     * the losses agree up to fp32's summation order (the tied embedding's halves), as they do in fp32
     * ({@code TrainCommandPipelineTest}: 1e-5).
     */
    @Test
    void aPipelineInBf16TrainsAsTheTrainerInBf16() throws IOException {
        String[] common = {"--steps", "4", "--warmup", "2", "--val-every", "0", "--samples", "0", "--eval-problems",
                "0", "--precision", "bf16"};
        Path trainer = tmp.resolve("trainer"), pipeline = tmp.resolve("pipeline");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(trainer, concat(common, "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = TrainCommandTest.run(TrainCommandTest.quick(pipeline, concat(common, "--pp", "2",
                "--micro-batches", "2")));
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(b.out()).contains("saved activations in BF16", "(16-bit) + ", " MiB fp32 working set");
        List<Double> la = losses(trainer), lb = losses(pipeline);
        assertThat(lb).hasSize(4);
        double worst = 0;
        for (int s = 0; s < 4; s++) {
            worst = Math.max(worst, Math.abs(lb.get(s) / la.get(s) - 1));
            assertThat(lb.get(s)).as("step %d", s).isCloseTo(la.get(s), within(1e-5 * la.get(s)));
        }
        System.out.printf("train --pp 2 vs --grad-accum 2, both bf16: losses %.1e relative at worst%n", worst);
    }

    @Test
    void tp2TimesPp2InFp16Trains() throws IOException {
        Path dir = tmp.resolve("tp2pp2");
        Result r = TrainCommandTest.run(TrainCommandTest.quick(dir, "--steps", "2", "--val-every", "0", "--samples",
                "0", "--eval-problems", "0", "--tp", "2", "--pp", "2", "--precision", "fp16"));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("pipeline: 2 stages × 2 tensor ranks", "saved activations in FP16",
                " MiB fp32 working set");
        assertThat(losses(dir)).hasSize(2).allMatch(Double::isFinite);
    }

    @Test
    void whatTheSplitPathsDoNotTakeIsAUsageError() {
        Path dir = tmp.resolve("bad");
        String[][] cases = {
                {"--tp", "2", "--ranks", "2", "--precision", "fp8"},
                {"--tp", "2", "--ranks", "2", "--precision", "fp16", "--loss-scale", "1024"},
                {"--pp", "2", "--precision", "fp16", "--loss-scale-window", "10"}};
        String[] messages = {
                "--tp has no fp8 path: use --precision fp32, bf16 or fp16",
                "--tp trains fp16 with the default loss scaling so far: drop --loss-scale and --loss-scale-window",
                "--pp 2 does not take --loss-scale or --loss-scale-window (fp16's defaults only) yet"};
        for (int i = 0; i < cases.length; i++) {
            Result r = TrainCommandTest.run(TrainCommandTest.quick(dir, cases[i]));
            assertThat(r.code()).as(String.join(" ", cases[i])).isEqualTo(2);
            assertThat(r.err()).contains(messages[i]).doesNotContain("Exception");
            assertThat(dir).doesNotExist();
        }
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    private static List<Double> losses(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().filter(l -> l.contains("train_loss"))
                .map(l -> Double.parseDouble(l.replaceAll("^.*\"train_loss\":([^,}]+)[,}].*$", "$1"))).toList();
    }
}
