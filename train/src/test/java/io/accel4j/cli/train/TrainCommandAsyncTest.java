package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code accel4j train --sync async}: with {@code --staleness 0} the servers' checkpoint is DDP's within
 * {@link #PARAM_TOL}, the metrics carry the staleness (all 0), a straggler with {@code --staleness 2} stays within its
 * bound; bad flags are usage errors naming the flag.
 */
class TrainCommandAsyncTest {

    /**
     * Parameters after 3 steps, absolute: 2 workers' gradients summed in arrival order and halved (exact) vs the ring's
     * sum halved (exact): the same values; 1e-6 is margin for a kernel that groups the AdamW ranges differently, far
     * below an update (lr ≥ 5e-5 times m̂/√v̂ ≈ 1).
     */
    private static final double PARAM_TOL = 1e-6;

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
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--seq", "16", "--batch", "2", "--threads",
                "2", "--val-every", "0", "--val-batches", "1", "--samples", "0", "--eval-problems", "0",
                "--data-order", "sequential", "--grad-clip", "0", "--steps", "3"), Stream.of(more))
                .toArray(String[]::new);
    }

    /** The fp32 parameters of an llm.c model file (after its 256-int header). */
    private static float[] params(Path file) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        b.position(1024);
        float[] p = new float[b.remaining() / 4];
        b.asFloatBuffer().get(p);
        return p;
    }

    private static List<Integer> stalenessMax(Path dir) throws IOException {
        Pattern p = Pattern.compile("\"staleness_max\":(\\d+)");
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().map(p::matcher).filter(Matcher::find)
                .map(m -> Integer.parseInt(m.group(1))).toList();
    }

    @Test
    void stalenessZeroCheckpointsWhatDdpDoes() throws IOException {
        Path ddp = tmp.resolve("ddp"), async = tmp.resolve("async");
        Result d = run(args(ddp, "--ranks", "2"));
        assertThat(d.code()).as(d.err()).isZero();
        Result a = run(args(async, "--ranks", "3", "--sync", "async", "--ps", "1", "--staleness", "0"));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(a.out()).contains("asynchronous data parallelism: 1 parameter server, 2 workers, staleness <= 0",
                "done: 3 steps");
        assertThat(stalenessMax(async)).containsExactly(0, 0, 0);
        assertThat(stalenessMax(ddp)).isEmpty();
        assertThat(async.resolve("staleness.png")).as("the staleness curve").isNotEmptyFile();
        assertThat(a.out()).contains("staleness curve " + async.resolve("staleness.png"));
        assertThat(ddp.resolve("staleness.png")).doesNotExist();
        assertThat(StalenessPlot.read(async.resolve("metrics.jsonl"))).extracting(StalenessPlot.Point::step)
                .containsExactly(0, 1, 2);
        float[] x = params(async.resolve("model_00000003.bin")), y = params(ddp.resolve("model_00000003.bin"));
        assertThat(x).hasSameSizeAs(y);
        double worst = 0;
        for (int i = 0; i < x.length; i++) {
            worst = Math.max(worst, Math.abs(x[i] - y[i]));
        }
        assertThat(worst).isLessThanOrEqualTo(PARAM_TOL);
    }

    /** A resumed async run (S = 0, 2 workers: the servers' sums a + b are the same bits in any order) is bit-exact. */
    @Test
    void anAsyncRunResumesBitForBit() throws IOException {
        Path straight = tmp.resolve("straight"), split = tmp.resolve("split");
        String[] async = {"--ranks", "3", "--sync", "async", "--staleness", "0"};
        Result a = run(args(straight, async));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = run(withSteps(args(split, async), "2"));
        assertThat(b.code()).as(b.err()).isZero();
        Result r = run(concat(args(split, async), "--resume", split.toString()));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("resumed " + split + " at step 2");
        assertThat(trainLosses(split)).hasSize(3).containsExactlyElementsOf(trainLosses(straight));
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin"}) {
            assertThat(Files.readAllBytes(split.resolve(f))).as(f).isEqualTo(Files.readAllBytes(straight.resolve(f)));
        }
    }

    private static String[] withSteps(String[] a, String steps) {
        String[] b = a.clone();
        for (int i = 0; i < b.length - 1; i++) {
            if (b[i].equals("--steps")) {
                b[i + 1] = steps;
            }
        }
        return b;
    }

    private static List<String> trainLosses(Path dir) throws IOException {
        Pattern p = Pattern.compile("\"train_loss\":([-0-9.eE]+)");
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().map(p::matcher).filter(Matcher::find)
                .map(m -> m.group(1)).toList();
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    @Test
    void aStragglerStaysWithinTheStalenessBound() throws IOException {
        Path dir = tmp.resolve("straggler");
        Result a = run(args(dir, "--ranks", "3", "--sync", "async", "--staleness", "2", "--straggler-ms",
                "1:60"));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(stalenessMax(dir)).hasSize(3).allMatch(s -> s <= 2);
    }

    @Test
    void badAsyncFlagsAreUsageErrorsNamingTheFlag() {
        String out = tmp.resolve("x").toString();
        String[][] cases = {
            {"--ranks", "3", "--sync", "async", "--staleness", "-1"}, {"--staleness must be >= 0 (0: synchronous), got -1"},
            {"--ranks", "2", "--sync", "async", "--ps", "2"}, {"--ps 2 leaves no worker among 2 ranks"},
            {"--ranks", "2", "--ps", "1"}, {"--ps goes with --sync async"},
            {"--ranks", "2", "--sync", "sometimes"}, {"--sync must be sync or async, got 'sometimes'"},
            {"--ranks", "2", "--straggler-ms", "x"}, {"--straggler-ms must be R:MS (a rank and milliseconds), got 'x'"},
            {"--ranks", "3", "--sync", "async", "--zero", "1"}, {"--sync async does not support --zero 1"},
        };
        for (int i = 0; i < cases.length; i += 2) {
            String[] a = Stream.concat(Stream.of("train", "--out", out), Stream.of(cases[i])).toArray(String[]::new);
            Result r = run(a);
            assertThat(r.code()).as(String.join(" ", a) + ": " + r.err()).isEqualTo(2);
            assertThat(r.err()).startsWith("accel4j: error: " + cases[i + 1][0]);
        }
    }
}
