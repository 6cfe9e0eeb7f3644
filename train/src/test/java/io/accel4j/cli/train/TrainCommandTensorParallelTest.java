package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.cli.Main;
import io.accel4j.fit.Learner;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
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

/**
 * {@code accel4j train --tp T}: the run through the Learner end to end (plan, progress, metrics, the whole model as an
 * llm.c file), dp = 2 × tp = 2 training as tp = 2 with the same global batch (per-step loss within 1e-5 relative:
 * the replicas' gradients averaged in another order), the memory plan equal to what is allocated, and the usage
 * errors (exit 2, naming --tp and the numbers) made before anything is written.
 */
class TrainCommandTensorParallelTest {

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

    /** A small token file: 4000 byte tokens of a repeating pattern. */
    private Path tokens() throws IOException {
        int[] t = new int[4000];
        for (int i = 0; i < t.length; i++) {
            t[i] = "12+34=46\n".charAt(i % 9);
        }
        Path p = tmp.resolve("train.bin");
        TokenFile.write(p, t);
        return p;
    }

    private String[] args(Path dir, String... more) throws IOException {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--train-data", tokens().toString(),
                "--seq", "16", "--threads", "2", "--val-every", "0", "--samples", "0", "--eval-problems", "0",
                "--warmup", "2"), Stream.of(more)).toArray(String[]::new);
    }

    private static List<Double> losses(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream()
                .map(l -> Double.parseDouble(l.replaceAll(".*\"train_loss\":([^,}]+).*", "$1"))).toList();
    }

    @Test
    void tp2AndDp2Tp2TrainTheSameEndToEnd() throws IOException {
        Path a = tmp.resolve("tp2"), b = tmp.resolve("dp2tp2");
        Result r = run(args(a, "--tp", "2", "--ranks", "2", "--batch", "4", "--steps", "3"));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("memory per rank (1 data-parallel × 2 tensor)", "tensor parallel: AdamW",
                "2 ranks (1 data-parallel × 2 tensor)", "done: 3 steps");
        GptConfig saved = LlmcCheckpoint.readConfig(a.resolve("model.bin"));
        assertThat(saved.NH()).isEqualTo(4);
        Result r2 = run(args(b, "--tp", "2", "--ranks", "4", "--batch", "2", "--steps", "3"));
        assertThat(r2.code()).as(r2.err()).isZero();
        List<Double> x = losses(a), y = losses(b);
        assertThat(x).hasSize(3);
        for (int i = 0; i < 3; i++) {
            assertThat(y.get(i)).as("step %d", i).isCloseTo(x.get(i), offset(1e-5 * x.get(i)));
        }
    }

    /**
     * Across layouts through llm.c files: a one-rank run's model file starts a tp = 2 run, whose model file (written
     * whole) a one-rank run then starts from. At lr = 1e-30 the tp run's step cannot move a parameter of magnitude
     * above ~1e-23 by a rounding step, so its file holds the one-rank file's parameters within 1e-20.
     */
    @Test
    void modelFilesCrossLayouts() throws IOException {
        Path one = tmp.resolve("one"), split = tmp.resolve("split"), back = tmp.resolve("back");
        Result r1 = run(args(one, "--batch", "2", "--steps", "2"));
        assertThat(r1.code()).as(r1.err()).isZero();
        Path saved = one.resolve("model_00000002.bin");
        Result r2 = run(args(split, "--tp", "2", "--ranks", "2", "--batch", "2", "--steps", "1", "--lr", "1e-30",
                "--grad-clip", "0", "--model", saved.toString()));
        assertThat(r2.code()).as(r2.err()).isZero();
        assertThat(r2.out()).contains("started from " + saved);
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            float[] want = LlmcCheckpoint.read(saved, a).params().toArray(java.lang.foreign.ValueLayout.JAVA_FLOAT);
            float[] got = LlmcCheckpoint.read(split.resolve("model.bin"), a).params()
                    .toArray(java.lang.foreign.ValueLayout.JAVA_FLOAT);
            assertThat(got).hasSameSizeAs(want);
            for (int i = 0; i < want.length; i++) {
                assertThat((double) got[i]).as("parameter %d", i).isCloseTo(want[i], offset(1e-20));
            }
        }
        Result r3 = run(args(back, "--batch", "2", "--steps", "1", "--model", split.resolve("model.bin").toString()));
        assertThat(r3.code()).as(r3.err()).isZero();
    }

    /** {@code --tp 2} stopped at step 2 and resumed to step 4 is the straight run, bit for bit (the same layout). */
    @Test
    void aTensorParallelRunResumesBitForBit() throws IOException {
        Path straight = tmp.resolve("straight"), stopped = tmp.resolve("stopped");
        String[] common = {"--tp", "2", "--ranks", "2", "--batch", "2", "--schedule", "constant"};
        Result a = run(Stream.concat(Stream.of(args(straight, "--steps", "4")), Stream.of(common))
                .toArray(String[]::new));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = run(Stream.concat(Stream.of(args(stopped, "--steps", "2")), Stream.of(common))
                .toArray(String[]::new));
        assertThat(b.code()).as(b.err()).isZero();
        Result c = run("train", "--resume", stopped.toString(), "--steps", "4");
        assertThat(c.code()).as(c.err()).isZero();
        assertThat(c.out()).contains("resumed " + stopped + " at step 2");
        assertThat(losses(stopped)).containsExactlyElementsOf(losses(straight));
    }

    @Test
    void layoutsThatDoNotFitAreUsageErrors() throws IOException {
        String[][] cases = {
            {"--tp", "3", "--ranks", "3"}, {"--tp", "2", "--ranks", "3"}, {"--tp", "2", "--ranks", "2", "--zero", "2"},
            {"--tp", "0"}, {"--tp", "2", "--ranks", "2", "--precision", "fp8"}};
        String[] want = {
            "--tp 3 must divide the attention heads NH = 4 of the model",
            "--tp 2 does not divide the 3 ranks (--ranks or mpirun's -np): the ranks are D·T",
            "--tp composes with --zero 0 or 1 so far, got --zero 2",
            "--tp must be >= 1, got 0",
            "--tp has no fp8 path: use --precision fp32, bf16 or fp16"};
        for (int i = 0; i < cases.length; i++) {
            Path dir = tmp.resolve("bad" + i);
            Result r = run(Stream.concat(Stream.of(args(dir)), Stream.of(cases[i])).toArray(String[]::new));
            assertThat(r.code()).as(String.join(" ", cases[i])).isEqualTo(2);
            assertThat(r.err()).contains(want[i]).doesNotContain("Exception");
            assertThat(dir).doesNotExist();
        }
    }

    @Test
    void thePlanIsWhatTheLearnerAllocates() throws IOException {
        GptConfig model = GptConfig.preset("tiny");
        try (TokenFile train = TokenFile.open(tokens())) {
            for (int[] layout : new int[][] {{2, 2, 0}, {4, 2, 1}, {4, 4, 0}}) {
                TrainConfig cfg = TrainConfig.builder().precision(Precision.FP32).batch(2).seq(16).steps(1)
                        .zeroStage(layout[2]).build();
                TensorParallelPlan plan = TensorParallelPlan.of(model, cfg, layout[1], layout[0]);
                try (Learner l = TensorParallelRun.learner(model, cfg, layout[1], layout[0], null, 2, train)
                        .build()) {
                    assertThat(plan.parameters()).isEqualTo(l.network().parameterBytes());
                    assertThat(plan.gradients()).isEqualTo(l.network().parameterBytes());
                    assertThat(plan.activations()).isEqualTo(l.network().activationBytes());
                    assertThat(plan.optimizerState()).isEqualTo(l.optimizerStateBytes());
                }
                assertThat(plan.total()).isLessThan(plan.unsplit());
            }
        }
        // which layouts of 4 ranks fit a budget: between tp 2's and tp 1's per-rank bytes only tp 2 and tp 4 do
        TrainConfig cfg = TrainConfig.builder().precision(Precision.FP32).batch(2).seq(16).steps(1).build();
        long tp1 = TensorParallelPlan.of(model, cfg, 1, 4).total(), tp2 = TensorParallelPlan.of(model, cfg, 2, 4)
                .total();
        assertThat(TensorParallelPlan.fitting(model, cfg, 4, (tp1 + tp2) / 2)).extracting(TensorParallelPlan::tp)
                .containsExactly(2, 4);
        assertThat(TensorParallelPlan.fitting(model, cfg, 4, tp1)).extracting(TensorParallelPlan::tp)
                .containsExactly(1, 2, 4);
    }
}
