package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ModelStates;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CLI trainer's start-up memory lines ({@code RankRun}: the model's bytes and activations, and
 * {@code ZeroMemory.describe(modelStateBytes, workingBytes)}, the ZeRO paper's accounting and what the rank allocated)
 * from a GPT-2 {@link Learner} on the trainer's parts ({@link LearnerGpt2Test#builder}): the same lines, and the same
 * byte counts, side by side with {@link Trainer}'s for one rank, DDP and ZeRO-1/2/3 at 2 and 3 ranks, the
 * recomputation varied (ZeRO-2/3's sharded units and working buffers included).
 */
class LearnerMemoryLineTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /** Rank 0's memory line and byte counts. */
    private static String trainer(TrainConfig cfg, int ranks) {
        if (ranks == 1) {
            return trainerRank(cfg, null);
        }
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(30))) {
            List<String> all = g.run(comm -> trainerRank(cfg, comm));
            return all.get(0);
        }
    }

    private static String trainerRank(TrainConfig cfg, Communicator comm) {
        try (Parallel pool = new Parallel(1);
             Gpt2 m = LearnerGpt2Test.initialised(new Gpt2(TrainerTest.TINY, new CpuOps(pool), cfg.batch(),
                     cfg.seq(), Gpt2Options.DEFAULT.withRecompute(recompute(cfg)))); // as RankRun builds it
             Trainer t = new Trainer(m, cfg, trainFile, null, comm, ModelStates::of)) {
            return line(t.memory().describe(t.modelStateBytes(), t.workingBytes()), t.modelStateBytes(),
                    t.workingBytes()) + " model " + m.totalBytes() + ", activations " + m.activationBytes();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static String line(String described, long held, long working) {
        return described + " [" + held + " bytes, " + working + " working]";
    }

    /** The recomputation the runs keep (the model line's activations): one kind for each stage, to vary them. */
    private static Recompute recompute(TrainConfig cfg) {
        return Recompute.values()[cfg.zeroStage() % Recompute.values().length];
    }

    @ParameterizedTest(name = "{0} ranks, ZeRO-{1}")
    @CsvSource({"1, 0", "2, 0", "2, 1", "3, 1", "2, 2", "3, 2", "2, 3", "3, 3"})
    void theLearnersMemoryLinesAreTheTrainers(int ranks, int zero) {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 1, 0f, zero, 0);
        String old = trainer(cfg, ranks);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, recompute(cfg), DType.FP32, data).build()) {
            String now = line(l.zeroMemory().describe(l.modelStateBytes(), l.workingBytes()), l.modelStateBytes(),
                    l.workingBytes()) + " model " + l.modelBytes() + ", activations "
                    + l.network().activationBytes();
            assertThat(now).isEqualTo(old);
            assertThat(l.workingBytes() > 0).as("working buffers").isEqualTo(zero >= 2);
        }
    }
}
