package io.accel4j.cli.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.cli.train.TrainCommand;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code accel4j launch}: two processes train exactly as {@code --ranks 2} does (tolerance none: the TCP ring sums
 * in the in-process ring's order, so losses and checkpoint bytes are identical); a rank that fails stops the job
 * with its exit code; ranks started with different flags are refused at the rendezvous; bad flags are usage errors.
 */
class LaunchCommandTest {

    @TempDir
    Path tmp;

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        return runAs(null, args);
    }

    /** {@code accel4j args}; with {@code env} non-null, as the train command's environment. */
    private static Result runAs(Map<String, String> env, String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        if (env != null) {
            TrainCommand train = cl.getSubcommands().get("train").getCommand();
            setEnv(train, env);
        }
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    /** TrainCommand's package-private {@code env} (the variables Launch reads), set from this package. */
    private static void setEnv(TrainCommand train, Map<String, String> env) {
        try {
            var f = TrainCommand.class.getDeclaredField("env");
            f.setAccessible(true);
            f.set(train, env);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String[] train(Path dir, String... more) {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--seq", "16", "--batch", "2", "--threads",
                "1", "--val-every", "0", "--val-batches", "1", "--samples", "0", "--eval-problems", "0",
                "--data-order", "shuffled", "--collective-timeout", "60"), Stream.of(more)).toArray(String[]::new);
    }

    private static String[] concat(String[] a, String... b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    /** The metrics' per-step train losses and gradient norms, as written (text, so equality is bit for bit). */
    private static List<String> lossesAndNorms(Path dir) throws IOException {
        Pattern p = Pattern.compile("\"(train_loss|grad_norm)\":([-0-9.eE]+)");
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("metrics.jsonl"))) {
            Matcher m = p.matcher(line);
            while (m.find()) {
                out.add(m.group(1) + "=" + m.group(2));
            }
        }
        return out;
    }

    @Test
    void twoProcessesTrainBitForBitLikeTwoRanksInOneProcess() throws IOException {
        Path launched = tmp.resolve("launched"), inProcess = tmp.resolve("in-process");
        Result l = run(concat(new String[] {"launch", "--nproc", "2", "--"}, train(launched, "--steps", "2")));
        assertThat(l.code()).as(l.out() + l.err()).isZero();
        assertThat(l.out()).contains("launch: 2 processes on this machine (ranks 0..1 of 2), rendezvous 127.0.0.1:",
                "[rank 0] using cpu", "2 data-parallel ranks over TCP (one process each)", "[rank 0] done: 2 steps",
                "launch: start-up to the first step: ");
        Result r = run(concat(train(inProcess, "--steps", "2"), "--ranks", "2"));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(lossesAndNorms(launched)).hasSize(4).containsExactlyElementsOf(lossesAndNorms(inProcess));
        for (String f : new String[] {"model_00000002.bin", "state_00000002.bin"}) {
            assertThat(Files.readAllBytes(launched.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(inProcess.resolve(f)));
        }
    }

    @Test
    void aRankThatFailsStopsTheOthersAndGivesItsExitCode() throws IOException {
        System.setProperty(JvmCommand.MAIN_PROPERTY, FakeRank.class.getName());
        try {
            long t0 = System.nanoTime();
            Path markers = tmp.resolve("markers");
            Files.createDirectories(markers);
            Result r = run("launch", "--nproc", "3", "--", markers.toString(), "--steps", "1");
            double s = (System.nanoTime() - t0) / 1e9;
            assertThat(r.code()).as(r.out() + r.err()).isEqualTo(3);
            assertThat(s).as("the sleeping ranks were stopped, not waited for (they sleep 120 s)").isLessThan(30);
            assertThat(r.out()).contains("[rank 0] fake rank 0 of 3 at 127.0.0.1:", " local 0/3 args " + markers + " --steps 1",
                    "[rank 2] fake rank 2 of 3");
            assertThat(r.err()).contains("[rank 1] rank 1 gives up",
                    "accel4j: error: rank 1 exited with code 3; the other ranks were stopped");
        } finally {
            System.clearProperty(JvmCommand.MAIN_PROPERTY);
        }
    }

    @Test
    void withKeepGoingAFailedRankLeavesTheOthersRunningAndStillGivesItsCode() {
        System.setProperty(JvmCommand.MAIN_PROPERTY, ExitingRank.class.getName());
        try {
            Result r = run("launch", "--nproc", "3", "--keep-going", "--", "x");
            assertThat(r.code()).as(r.out() + r.err()).isEqualTo(3);
            assertThat(r.out()).contains("[rank 0] rank 0 finished", "[rank 2] rank 2 finished");
            assertThat(r.err()).contains("[rank 1] rank 1 exits",
                    "accel4j: error: rank 1 exited with code 3; the other ranks ran on (--keep-going)");
        } finally {
            System.clearProperty(JvmCommand.MAIN_PROPERTY);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static Map<String, String> rank(int rank, int size, int port) {
        return Map.of("RANK", Integer.toString(rank), "WORLD_SIZE", Integer.toString(size), "MASTER_ADDR",
                "127.0.0.1", "MASTER_PORT", Integer.toString(port));
    }

    @Test
    void ranksStartedWithDifferentFlagsAreRefusedNamingTheRank() throws Exception {
        int port = freePort();
        Path dir = tmp.resolve("mismatch");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<Result> zero = pool.submit(() -> runAs(rank(0, 2, port), train(dir, "--steps", "2")));
            Future<Result> one = pool.submit(() -> runAs(rank(1, 2, port), train(dir, "--steps", "3")));
            Result r0 = zero.get(60, TimeUnit.SECONDS), r1 = one.get(60, TimeUnit.SECONDS);
            assertThat(r0.code()).as(r0.err()).isEqualTo(1);
            assertThat(r0.err()).startsWith("accel4j: error: rank 0 of 2: rank 0 at 127.0.0.1:" + port + ": rank 1's "
                    + "training configuration differs from rank 0's");
            assertThat(r1.code()).as(r1.err()).isEqualTo(1);
            assertThat(r1.err()).contains("rank 1 of 2: rank 1: rank 0 at 127.0.0.1:" + port + " refused the job: "
                    + "rank 1's training configuration differs");
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aPortInUseIsARuntimeErrorNamingIt() throws IOException {
        try (ServerSocket taken = new ServerSocket(0)) {
            Result r = runAs(rank(0, 2, taken.getLocalPort()), train(tmp.resolve("port"), "--steps", "1"));
            assertThat(r.code()).isEqualTo(1);
            assertThat(r.err()).startsWith("accel4j: error: rank 0 of 2: rank 0 cannot listen at 127.0.0.1:"
                    + taken.getLocalPort());
        }
    }

    @Test
    void badLaunchFlagsAreUsageErrors() {
        Result r = run("launch", "--nproc", "0", "--", "train");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --nproc must be >= 1, got 0");
        r = run("launch", "--nproc", "2");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: launch needs the command each rank runs after --");
        r = run("launch", "--nproc", "2", "--nnodes", "2", "--", "train");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --nnodes 2 needs --rdzv HOST:PORT");
        r = run("launch", "--nproc", "2", "--rdzv", "nohost", "--", "train");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --rdzv must be HOST:PORT with a port in [1, 65535], got "
                + "'nohost'");
        r = run("launch", "--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--rdzv", "h:1", "--", "train");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).startsWith("accel4j: error: --node-rank must be in [0, 2) (--nnodes 2), got 2");
    }
}
