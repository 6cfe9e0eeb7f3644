package io.accel4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code accel4j bench train} on the tiny model: the table, the profile, usage errors. */
class TrainBenchCommandTest {

    private record Result(int code, String out, String err) {}

    /** Runs the command line; {@code bench train} without its 3-second JIT warm-up unless the test gives one. */
    private static Result run(String... args) {
        if (args.length >= 2 && args[0].equals("bench") && args[1].equals("train")
                && !List.of(args).contains("--warmup-seconds")) {
            String[] with = new String[args.length + 2];
            with[0] = "bench";
            with[1] = "train";
            with[2] = "--warmup-seconds";
            with[3] = "0";
            System.arraycopy(args, 2, with, 4, args.length - 2);
            args = with;
        }
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void aFewTinyStepsPrintTheTableAndTheProfile() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "3", "--threads", "1,2", "--batch", "2",
                "--seq", "32", "--profile");

        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("training step of tiny", "B=2, T=32", "1 untimed + 3 timed steps",
                "threads", "median ms", "best ms", "tokens/s", "profile, 1 thread, 3 timed steps",
                "profile, 2 threads, 3 timed steps", "matmulForward", "matmulBackward", "attentionForward",
                "classifierForwardBackward", "adamw", "GFLOP/s", "GB/s", "(outside the ops)", "per step: forward");
        List<String[]> rows = r.out().lines().map(String::strip).filter(l -> l.matches("[12]\\s+\\d.*"))
                .map(l -> l.split("\\s+")).toList();
        assertThat(rows).hasSize(2);
        for (String[] row : rows) {
            assertThat(Double.parseDouble(row[3])).as("tokens/s").isPositive();
            assertThat(row[5]).as("of the FLOP limit").matches("\\d+");
            assertThat(row[6]).isEqualTo("%");
            assertThat(Double.parseDouble(row[7])).as("first loss ~ ln 256").isBetween(5.0, 6.5);
        }
        assertThat(r.out()).containsPattern("FLOP limit: [0-9.]+ GFLOP of matmul per step .* GFLOP/s per core "
                + "\\(measured: fp32 FMA");
        // the kernels are deterministic: the same losses on 1 and 2 threads
        assertThat(rows.get(1)[7]).isEqualTo(rows.get(0)[7]);
        assertThat(rows.get(1)[8]).isEqualTo(rows.get(0)[8]);
        // every op of the model's step appears, with its call count: 2 layers, 3 plain matmuls each plus the LM
        // head, and each layer's MLP fc with its GELU fused
        assertThat(calls(r.out(), "matmulForward")).isEqualTo(3 * (2 * 3 + 1));
        assertThat(calls(r.out(), "matmulForwardGelu")).isEqualTo(3 * 2);
        assertThat(calls(r.out(), "matmulBackwardGelu")).isEqualTo(3 * 2);
    }

    /** --bf16-params times bf16 working weights: the same first loss as bf16 without it (the weights start bf16). */
    @Test
    void bf16WorkingWeightsAreTimedAndRefusedWithoutBf16Matmuls() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "2", "--threads", "1", "--batch", "2",
                "--seq", "16", "--precision", "bf16", "--bf16-params", "--grad-storage", "bf16");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("bf16 gradients, bf16 working weights (fp32 master)");
        List<String[]> rows = r.out().lines().map(String::strip).filter(l -> l.matches("1\\s+\\d.*"))
                .map(l -> l.split("\\s+")).toList();
        assertThat(rows).hasSize(1);
        assertThat(Double.parseDouble(rows.get(0)[7])).as("first loss ~ ln 256").isBetween(5.0, 6.5);
        Result bad = run("bench", "train", "--model", "tiny", "--bf16-params");
        assertThat(bad.code()).isEqualTo(2);
        assertThat(bad.err()).contains("--bf16-params needs --precision bf16 (this run is fp32)");
    }

    /** Issue 19's figure: the bench model's step (L4 C256 Vp 50304, B4 T64) is ~24.6 GFLOP of matmul. */
    @Test
    void theBenchModelsStepIs24Point6GflopOfMatmul() {
        var bench = new io.accel4j.train.model.GptConfig(256, 50257, 50304, 4, 4, 256);
        double perToken = TrainBenchCommand.matmulFlopsPerToken(bench);
        assertThat(perToken).isEqualTo(6.0 * (4 * 12 * 256 * 256 + 50304 * 256));
        assertThat(perToken * 4 * 64 / 1e9).isCloseTo(24.6, org.assertj.core.data.Offset.offset(0.05));
    }

    /** The warm-up trains a throwaway model: the measured run's losses are those of a run without it. */
    @Test
    void theWarmUpDoesNotChangeTheLosses() {
        Result cold = run("bench", "train", "--model", "tiny", "--steps", "2", "--threads", "1", "--batch", "1",
                "--seq", "8");
        Result warm = run("bench", "train", "--model", "tiny", "--steps", "2", "--threads", "1", "--batch", "1",
                "--seq", "8", "--warmup-seconds", "0.3");
        assertThat(cold.code()).as(cold.err()).isZero();
        assertThat(warm.code()).as(warm.err()).isZero();
        assertThat(losses(warm.out())).isEqualTo(losses(cold.out())).hasSize(2);
        assertThat(run("bench", "train", "--warmup-seconds", "-1").code()).isEqualTo(2);
    }

    /** The first and last loss of the row for one thread. */
    private static List<String> losses(String out) {
        String[] row = out.lines().map(String::strip).filter(l -> l.matches("1\\s+\\d.*")).findFirst()
                .orElseThrow().split("\\s+");
        return List.of(row[row.length - 2], row[row.length - 1]);
    }

    @Test
    void withoutProfileThereIsNoProfile() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "1", "--warmup", "0", "--threads", "1",
                "--batch", "1", "--seq", "8");

        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("tokens/s").doesNotContain("profile,", "matmulForward");
    }

    @Test
    void bf16OperandsAreNamedAndTrainTheSameModel() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "1", "--warmup", "0", "--threads", "1",
                "--batch", "1", "--seq", "8", "--precision", "bf16");

        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("bf16 matmul operands", "tokens/s");
    }

    @Test
    void fp8RunsTheBlocksInFp8() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "2", "--warmup", "0", "--threads", "1",
                "--batch", "1", "--seq", "8", "--precision", "fp8");

        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("fp8 matmul operands", "tokens/s");
    }

    @Test
    void theStorageIsTimedApartFromTheOperands() {
        Result r = run("bench", "train", "--model", "tiny", "--steps", "2", "--warmup", "0", "--threads", "1",
                "--batch", "1", "--seq", "8", "--activation-storage", "bf16");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("fp32 matmul operands, bf16 saved activations", "tokens/s");
        r = run("bench", "train", "--model", "tiny", "--steps", "2", "--warmup", "0", "--threads", "1",
                "--batch", "1", "--seq", "8", "--precision", "fp16");
        assertThat(r.out()).as(r.err()).contains("fp16 matmul operands, fp16 saved activations");
    }

    @Test
    void badOptionsAreUsageErrors() {
        String[][] cases = {
            {"--model", "gpt3"}, {"--steps", "0"}, {"--seq", "65"}, {"--threads", "0"}, {"--batch", "0"},
            {"--warmup", "-1"}, {"--lr", "-1"}, {"--activation-storage", "fp8"}
        };
        for (String[] c : cases) {
            String[] head = c[0].equals("--model") ? new String[] {"bench", "train"}
                    : new String[] {"bench", "train", "--model", "tiny"};
            String[] args = new String[head.length + c.length];
            System.arraycopy(head, 0, args, 0, head.length);
            System.arraycopy(c, 0, args, head.length, c.length);
            Result r = run(args);
            assertThat(r.code()).as(String.join(" ", c)).isEqualTo(2);
            assertThat(r.err()).as(String.join(" ", c)).startsWith("accel4j: error: " + c[0]);
        }
        Result missing = run("bench");
        assertThat(missing.err()).contains("one of gemm, train");
    }

    /** The call count of the profile's row for {@code op} (the first column after its name). */
    private static int calls(String out, String op) {
        String row = out.lines().filter(l -> l.split("\\s+")[0].equals(op)).findFirst().orElseThrow();
        return Integer.parseInt(row.split("\\s+")[1]);
    }
}
