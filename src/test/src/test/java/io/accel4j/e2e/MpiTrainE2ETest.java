package io.accel4j.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.Mpirun;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code mpirun -np 2 accel4j train}: each process one rank on Open MPI. Skipped (with the reason) without
 * {@code mpirun} or {@code libmpi}; {@code scripts/install-openmpi.sh} installs both. About 15 s each on 2 cores.
 */
class MpiTrainE2ETest {

    /** Bound on one mpirun: two JVM start-ups, MPI_Init and three steps of the tiny model, with room to spare. */
    private static final Duration LIMIT = Duration.ofSeconds(90);

    @TempDir
    Path tmp;

    private static Path mpirunOrSkip() {
        Path mpirun = Mpirun.find().orElse(null);
        Assumptions.assumeTrue(mpirun != null, "mpirun not on PATH: run scripts/install-openmpi.sh");
        Assumptions.assumeTrue(MpiLibrary.available(), MpiLibrary::unavailableReason);
        return mpirun;
    }

    /** {@code accel4j train} with a few tiny steps; 1 kernel thread per rank in both launches. */
    private static List<String> trainArgs(Path dir, String... more) {
        return Stream.concat(Stream.of("train", "--out", dir.toString(), "--seq", "16", "--batch", "2", "--steps", "3",
                "--data-order", "shuffled", "--bucket-mb", "0.1", "--val-every", "0", "--val-batches", "1",
                "--samples", "0", "--eval-problems", "0"), Stream.of(more)).toList();
    }

    private static Mpirun.Result mpirunTrain(Path mpirun, int np, List<String> args, Path cwd) throws Exception {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        return Mpirun.run(Mpirun.javaCommand(mpirun, np, List.of(), cp, Main.class.getName(), args), cwd, LIMIT);
    }

    /**
     * Two MPI ranks and two in-process ranks reduce the same gradients: with two ranks every element's sum is one
     * fp32 addition (commutative, so the same bits whichever rank adds) and AVG one division by 2 on both backends, so
     * the losses, the parameters and the optimizer state are bit-identical.
     */
    @Test
    @Timeout(180)
    void twoMpiRanksTrainBitForBitLikeTwoInProcessRanks() throws Exception {
        Path mpirun = mpirunOrSkip();
        Path viaMpi = tmp.resolve("mpi"), inProcess = tmp.resolve("in-process");
        Mpirun.Result m = mpirunTrain(mpirun, 2, trainArgs(viaMpi, "--threads", "1"), tmp);
        assertThat(m.finished()).as("mpirun ended within %s; output:%n%s", LIMIT, m.output()).isTrue();
        assertThat(m.exitCode()).as("mpirun's exit code; output:%n%s", m.output()).isZero();
        assertThat(m.output()).contains("2 data-parallel ranks under mpirun (Open MPI)", "done: 3 steps");
        assertThat(m.output().lines().filter(l -> l.startsWith("using ")).count()).as("only rank 0 prints")
                .isEqualTo(1);

        Cli.Result c = Cli.run(trainArgs(inProcess, "--ranks", "2", "--threads", "2").toArray(String[]::new));
        assertThat(c.exitCode()).as(c.err()).isZero();

        assertThat(trainLosses(viaMpi)).hasSize(3).containsExactlyElementsOf(trainLosses(inProcess));
        for (String f : List.of("model_00000003.bin", "state_00000003.bin")) {
            assertThat(Files.mismatch(viaMpi.resolve(f), inProcess.resolve(f))).as("first differing byte of %s", f)
                    .isEqualTo(-1L);
        }
        try (Stream<Path> files = Files.list(viaMpi)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList()).containsExactly(
                    "checkpoint.properties", "loss.png", "metrics.jsonl", "model_00000003.bin", "run.properties",
                    "state_00000003.bin", "train.bin", "val.bin");
        }
    }

    @Test
    @Timeout(120)
    void ranksThatContradictMpirunAreAUsageErrorOnEveryRank() throws Exception {
        Path mpirun = mpirunOrSkip();
        Mpirun.Result m = mpirunTrain(mpirun, 2, trainArgs(tmp.resolve("x"), "--ranks", "3"), tmp);
        assertThat(m.finished()).as("mpirun ended within %s; output:%n%s", LIMIT, m.output()).isTrue();
        assertThat(m.exitCode()).as("mpirun's exit code; output:%n%s", m.output()).isNotZero();
        assertThat(m.output().lines().filter(l -> l.startsWith("accel4j: error: --ranks 3 contradicts mpirun's 2 "
                + "processes")).count()).as("error lines; output:%n%s", m.output()).isEqualTo(2);
        assertThat(tmp.resolve("x")).doesNotExist();
    }

    /**
     * {@code mpirun -np 2 accel4j train --pp 2}: one pipeline stage per process, against the two stages in one process:
     * the same computation in the same order (Open MPI only moves the activations), so the same losses and model file.
     */
    @Test
    @Timeout(180)
    void twoMpiStagesTrainLikeTwoInProcessStages() throws Exception {
        Path mpirun = mpirunOrSkip();
        Path viaMpi = tmp.resolve("pp-mpi"), inProcess = tmp.resolve("pp-in-process");
        Mpirun.Result m = mpirunTrain(mpirun, 2, trainArgs(viaMpi, "--threads", "1", "--pp", "2", "--micro-batches",
                "2"), tmp);
        assertThat(m.finished()).as("mpirun ended within %s; output:%n%s", LIMIT, m.output()).isTrue();
        assertThat(m.exitCode()).as("mpirun's exit code; output:%n%s", m.output()).isZero();
        assertThat(m.output()).contains("pipeline: 2 stages, 2 micro-batches, 1f1b");
        Cli.Result c = Cli.run(trainArgs(inProcess, "--threads", "2", "--pp", "2", "--micro-batches", "2")
                .toArray(String[]::new));
        assertThat(c.exitCode()).as(c.err()).isZero();
        assertThat(trainLosses(viaMpi)).hasSize(3).containsExactlyElementsOf(trainLosses(inProcess));
        assertThat(Files.mismatch(viaMpi.resolve("model_00000003.bin"), inProcess.resolve("model_00000003.bin")))
                .isEqualTo(-1L);
    }

    private static List<Double> trainLosses(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().filter(l -> l.contains("train_loss"))
                .map(l -> Double.parseDouble(l.replaceAll("^.*\"train_loss\":([^,]+),.*$", "$1"))).toList();
    }
}
