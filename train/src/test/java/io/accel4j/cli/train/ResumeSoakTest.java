package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.train.checkpoint.CheckpointFiles;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Soak of checkpointing (issue 21 item 11): a run killed with SIGKILL at random moments (mid-step, mid-save) and
 * resumed each time ends with the losses and the metrics of an uninterrupted run, each step recorded once, and
 * leaves no temporary file. Each attempt is a fresh JVM ({@code java … io.accel4j.cli.Main train}), as a user's
 * would be. {@value #KILLS} kills by default ({@code -Daccel4j.soak.kills=N} for more); the seed of the kill times is
 * printed, {@code -Daccel4j.soak.seed=S} repeats it.
 */
class ResumeSoakTest {

    private static final int KILLS = 5;
    private static final int STEPS = 12;

    @TempDir
    Path tmp;

    private static final String[] FLAGS = {"--steps", Integer.toString(STEPS), "--save-every", "1", "--batch", "2",
        "--seq", "16", "--threads", "1", "--lr", "3e-3", "--schedule", "constant", "--warmup", "0", "--val-every", "4",
        "--val-batches", "1", "--samples", "0", "--eval-problems", "0"};

    @Test
    void aRunKilledAtRandomMomentsAndResumedEndsAsAnUninterruptedOne() throws Exception {
        Path straight = tmp.resolve("straight");
        List<String> args = new ArrayList<>(List.of("train", "--out", straight.toString()));
        args.addAll(List.of(FLAGS));
        TrainCommandTest.Result r = run(args.toArray(String[]::new));
        assertThat(r.code()).as(r.err()).isZero();

        long seed = Long.getLong("accel4j.soak.seed", System.nanoTime());
        int kills = Integer.getInteger("accel4j.soak.kills", KILLS);
        Random random = new Random(seed);
        Path dir = tmp.resolve("killed");
        int killed = 0, attempts = 0;
        while (true) {
            attempts++;
            assertThat(attempts).as("seed %d: attempts", seed).isLessThan(kills * 3 + 10);
            boolean resumable = Files.exists(dir.resolve(CheckpointFiles.POINTER));
            List<String> cmd = new ArrayList<>(javaCommand());
            cmd.addAll(List.of("train", "--out", dir.toString()));
            cmd.addAll(resumable ? List.of("--resume", dir.toString()) : List.of(FLAGS));
            if (!resumable && Files.exists(dir)) {
                cmd.add("--overwrite"); // killed before its first checkpoint: what it wrote is another run's
            }
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(tmp.resolve("log-" + attempts + ".txt").toFile()).start();
            if (killed < kills) {
                // a moment in the JVM's start, the data generation, a step or a save (about 1 to 4 s in all)
                long ms = 300 + random.nextInt(2500);
                if (!p.waitFor(ms, TimeUnit.MILLISECONDS)) {
                    p.destroyForcibly(); // SIGKILL
                    p.waitFor();
                    killed++;
                    continue;
                }
            }
            assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("seed %d: attempt %d finishes", seed, attempts).isTrue();
            assertThat(p.exitValue()).as("seed %d, attempt %d: %s", seed, attempts,
                    Files.readString(tmp.resolve("log-" + attempts + ".txt"))).isZero();
            break;
        }
        System.out.printf("resume soak: seed %d, %d kills, %d attempts%n", seed, killed, attempts);
        assertThat(records(dir)).as("seed %d", seed).containsExactlyElementsOf(records(straight));
        assertThat(Files.readAllBytes(dir.resolve(String.format("model_%08d.bin", STEPS))))
                .isEqualTo(Files.readAllBytes(straight.resolve(String.format("model_%08d.bin", STEPS))));
        try (var files = Files.list(dir)) {
            assertThat(files.map(f -> f.getFileName().toString())).noneMatch(n -> n.endsWith(".tmp"));
        }
    }

    /** Each metrics line without its timings: step, losses, lr, grad norm. */
    private static List<String> records(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream()
                .map(l -> l.replaceAll(",\"step_ms\":[^,}]+", "").replaceAll(",\"tokens_per_s\":[^,}]+", "")
                        .replaceAll(",\"data_ms\":[^,}]+", ""))
                .toList();
    }

    /** {@code java} with this JVM's module and native-access flags and class path, running the CLI. */
    private static List<String> javaCommand() {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("--add-modules") || a.startsWith("--enable-native-access")) {
                cmd.add(a);
            }
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        return cmd;
    }
}
