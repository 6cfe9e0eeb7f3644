package io.accel4j.cli.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.Mpirun;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code train --sync async} with one process per rank: under {@code launch --nproc 3} with {@code --staleness 0} the
 * losses, model and optimizer state are the in-process run's bit for bit, and so under {@code mpirun -np 3} (skipped,
 * saying why, without mpirun or libmpi) (tolerance none: the server sums the pushes
 * in worker order whatever the arrival order, and both runs apply the same AdamW to the same shard); a worker process
 * killed with {@code S > 0} (a straggler, {@code --staleness 1}) is dropped by the server, naming it, the others
 * finish, and the bound held in every step by the version stamps; a server process killed stops every worker with an
 * error naming it, well within the timeout. The killed-process tests start the ranks as another launcher would
 * (env://): {@code accel4j launch} stops the job when a rank dies, by design.
 */
class AsyncProcessesTest {

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

    private static String[] train(Path dir, String... more) {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--seq", "16", "--batch", "2", "--threads",
                "1", "--val-every", "0", "--val-batches", "1", "--samples", "0", "--eval-problems", "0",
                "--data-order", "sequential", "--sync", "async", "--ps", "1"), Stream.of(more)).toArray(String[]::new);
    }

    private static String[] launch3(String[] train) {
        return Stream.concat(Stream.of("launch", "--nproc", "3", "--"), Stream.of(train)).toArray(String[]::new);
    }

    private static List<String> field(Path dir, String name) throws IOException {
        Pattern p = Pattern.compile("\"" + name + "\":([-0-9.eE]+)");
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("metrics.jsonl"))) {
            Matcher m = p.matcher(line);
            if (m.find()) {
                out.add(m.group(1));
            }
        }
        return out;
    }

    @Test
    void stalenessZeroOverThreeProcessesIsTheInProcessRunBitForBit() throws IOException {
        Path launched = tmp.resolve("launched"), inProcess = tmp.resolve("in-process");
        Result l = run(launch3(train(launched, "--steps", "3", "--staleness", "0", "--collective-timeout", "60")));
        assertThat(l.code()).as(l.out() + l.err()).isZero();
        assertThat(l.out()).contains("[rank 0] asynchronous data parallelism: 1 parameter server (ranks 2..2), 2 "
                + "workers (ranks 0..1), staleness <= 0, one process each", "[rank 0] done: 3 steps");
        Result r = run(Stream.concat(Stream.of(train(inProcess, "--steps", "3", "--staleness", "0")),
                Stream.of("--ranks", "3")).toArray(String[]::new));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(field(launched, "train_loss")).hasSize(3).containsExactlyElementsOf(field(inProcess, "train_loss"));
        assertThat(field(launched, "staleness_max")).containsExactly("0", "0", "0");
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin"}) {
            assertThat(Files.readAllBytes(launched.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(inProcess.resolve(f)));
        }
    }

    @Test
    void stalenessZeroUnderMpirunIsTheInProcessRunBitForBit() throws Exception {
        Path mpirun = Mpirun.find().orElse(null);
        Assumptions.assumeTrue(mpirun != null, "mpirun not on PATH: run scripts/install-openmpi.sh");
        Assumptions.assumeTrue(MpiLibrary.available(), MpiLibrary::unavailableReason);
        Path mpi = tmp.resolve("mpi"), inProcess = tmp.resolve("in-process");
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Mpirun.Result m = Mpirun.run(Mpirun.javaCommand(mpirun, 3, List.of(), cp, Main.class.getName(),
                List.of(train(mpi, "--steps", "3", "--staleness", "0", "--collective-timeout", "60"))), tmp,
                Duration.ofSeconds(120));
        assertThat(m.finished()).as(m.output()).isTrue();
        assertThat(m.exitCode()).as(m.output()).isZero();
        assertThat(m.output()).contains("(under mpirun (Open MPI): point-to-point messages", "done: 3 steps");
        Result r = run(Stream.concat(Stream.of(train(inProcess, "--steps", "3", "--staleness", "0")),
                Stream.of("--ranks", "3")).toArray(String[]::new));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(field(mpi, "train_loss")).hasSize(3).containsExactlyElementsOf(field(inProcess, "train_loss"));
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin"}) {
            assertThat(Files.readAllBytes(mpi.resolve(f))).as(f).isEqualTo(Files.readAllBytes(inProcess.resolve(f)));
        }
    }

    // ---------------------------------------------------------------- killed processes (env:// ranks, no launcher)

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Three rank processes of {@code train} started as another launcher would (env://), output into files. */
    private List<Process> start(String[] train) throws IOException {
        int port = freePort();
        List<Process> ps = new ArrayList<>();
        for (int r = 0; r < 3; r++) {
            ProcessBuilder pb = new ProcessBuilder(JvmCommand.of(List.of(train)));
            pb.environment().put("RANK", Integer.toString(r));
            pb.environment().put("WORLD_SIZE", "3");
            pb.environment().put("LOCAL_RANK", Integer.toString(r));
            pb.environment().put("LOCAL_WORLD_SIZE", "3");
            pb.environment().put("MASTER_ADDR", "127.0.0.1");
            pb.environment().put("MASTER_PORT", Integer.toString(port));
            pb.redirectErrorStream(true);
            pb.redirectOutput(tmp.resolve("rank" + r + ".log").toFile());
            ps.add(pb.start());
        }
        return ps;
    }

    /** Waits (up to 60 s) until rank 0 has written {@code steps} steps' metrics. */
    private static void awaitSteps(Path dir, int steps) throws Exception {
        Path metrics = dir.resolve("metrics.jsonl");
        for (int i = 0; i < 600; i++) {
            if (Files.exists(metrics) && Files.readAllLines(metrics).size() >= steps) {
                return;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("rank 0 wrote no " + steps + " steps in 60 s");
    }

    private String log(int rank) throws IOException {
        return Files.readString(tmp.resolve("rank" + rank + ".log"));
    }

    private static int exit(Process p) throws InterruptedException {
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("a rank did not exit within 60 s");
        }
        return p.exitValue();
    }

    @Test
    void aKilledWorkerIsDroppedAndTheOthersFinish() throws Exception {
        Path dir = tmp.resolve("worker-killed");
        List<Process> ps = start(train(dir, "--steps", "12", "--staleness", "1", "--collective-timeout", "4",
                "--straggler-ms", "1:100"));
        try {
            awaitSteps(dir, 3);
            ps.get(1).destroyForcibly();
            assertThat(exit(ps.get(0))).as(log(0)).isZero();
            assertThat(exit(ps.get(2))).as(log(2)).isZero();
            assertThat(log(2)).contains("parameter server 0: dropped worker 1: no gradient for step ",
                    "(--collective-timeout); training goes on without it");
            assertThat(log(0)).contains("done: 12 steps");
            assertThat(field(dir, "staleness_max")).as("from the version stamps").hasSize(12)
                    .allMatch(s -> Integer.parseInt(s) <= 1).contains("1");
        } finally {
            ps.forEach(Process::destroyForcibly);
        }
    }

    @Test
    void aKilledServerStopsEveryWorkerNamingIt() throws Exception {
        Path dir = tmp.resolve("server-killed");
        List<Process> ps = start(train(dir, "--steps", "200", "--staleness", "1", "--collective-timeout", "30"));
        try {
            awaitSteps(dir, 2);
            long t0 = System.nanoTime();
            ps.get(2).destroyForcibly();
            assertThat(exit(ps.get(0))).as(log(0)).isEqualTo(1);
            assertThat(exit(ps.get(1))).as(log(1)).isEqualTo(1);
            double s = (System.nanoTime() - t0) / 1e9;
            assertThat(s).as("well before the 30 s timeout: the closed connection says it").isLessThan(15);
            for (int r = 0; r < 2; r++) {
                // the closed connection, or a push that could not be written: either way the server is named
                assertThat(log(r)).contains("accel4j: error: rank " + r + " of 3: parameter server 0 (rank 2) is gone: ")
                        .doesNotContain("\tat ");
            }
        } finally {
            ps.forEach(Process::destroyForcibly);
        }
    }
}
