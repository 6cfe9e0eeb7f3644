package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ModelStates;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CLI trainer's validation on the Java API: {@link Learner#evaluate} over the val file's first batches (a fresh
 * sequential {@link TokenSource} each time) gives {@code Trainer}'s val losses bit for bit, every few steps, and —
 * with FP8, whose forwards would record the val data's amaxes — leaves training as it was: the run's steps and
 * parameters are the trainer's with validation. Old and new side by side, at one rank and two.
 */
class LearnerValidationTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static TokenFile valFile;
    private static final int VAL_EVERY = 2;
    private static final int VAL_BATCHES = 3;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
        valFile = TrainerTest.tokenFile(tmp.resolve("val.bin"), 200, new Random(12));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
    }

    private static TrainConfig cfg(String p, int K) {
        TrainConfig c = LearnerGpt2Test.cfg(p, K, 0.5f, 0, 0);
        return TrainerTest.base().steps(c.steps()).gradAccum(K).gradClip(0.5f).weightDecay(0.1f).bucketBytes(0)
                .precision(c.precision()).valEvery(VAL_EVERY).valBatches(VAL_BATCHES).build();
    }

    /** Every step's metrics line as the CRC sees it, the val losses, and the final parameters' CRC. */
    private record Run(List<Double> val, String crc) {}

    private static Run trainerRank(TrainConfig cfg, Communicator comm) throws IOException {
        DType operands = cfg.precision().operands();
        try (Parallel pool = new Parallel(1);
             Gpt2 m = new Gpt2(TrainerTest.TINY, new CpuOps(pool), cfg.batch(), TrainerTest.TINY.maxT(),
                     Gpt2Options.DEFAULT.withPrecision(operands, cfg.precision().fp8()));
             Trainer t = new Trainer(m, cfg, trainFile, valFile, comm, ModelStates::of)) {
            m.initialise(3);
            List<StepMetrics> steps = new ArrayList<>();
            List<Double> val = new ArrayList<>();
            while (!t.done()) {
                StepMetrics s = t.trainStep();
                steps.add(s);
                if (!Double.isNaN(s.valLoss())) {
                    val.add(s.valLoss());
                }
            }
            assertThat(t.valBatches()).isEqualTo(VAL_BATCHES);
            return new Run(val, LearnerGpt2Test.crc(steps, m.params()));
        }
    }

    private static Run trainer(TrainConfig cfg, int ranks) throws IOException {
        if (ranks == 1) {
            return trainerRank(cfg, null);
        }
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(30))) {
            return g.run(comm -> {
                try {
                    return trainerRank(cfg, comm);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).get(0);
        }
    }

    private static Run learner(TrainConfig cfg, int ranks) throws IOException {
        try (Arena arena = Arena.ofConfined();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, Recompute.NONE, DType.FP32, data).build()) {
            try (Parallel pool = new Parallel(1); Gpt2 m = new Gpt2(TrainerTest.TINY, new CpuOps(pool), 1, 1)) {
                m.initialise(3);
                var host = arena.allocate(m.layout().count() * Float.BYTES, 64);
                m.copyParamsToHost(host);
                l.loadParameters(host);
            }
            List<StepMetrics> steps = new ArrayList<>();
            List<Double> val = new ArrayList<>();
            for (int s = 0; s < cfg.steps(); s++) {
                if (s % VAL_EVERY == 0) {
                    try (TokenSource v = new TokenSource(TokenShards.of(valFile), SampleOrder.Mode.SEQUENTIAL, 0, 1)) {
                        DataSource source = v.open(0, 1, cfg.batch(), cfg.seq());
                        val.add(l.evaluate(source, VAL_BATCHES));
                    }
                }
                steps.addAll(l.fit(1, null));
            }
            return new Run(val, LearnerGpt2Test.crc(steps, l.network().params()));
        }
    }

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}")
    @CsvSource({"1, fp32, 2", "1, fp8, 1", "2, fp8, 2", "2, bf16, 1"})
    void theJavaApiValidatesAsTheTrainerWithoutChangingTraining(int ranks, String p, int K) throws IOException {
        TrainConfig cfg = cfg(p, K);
        Run old = trainer(cfg, ranks);
        Run now = learner(cfg, ranks);
        assertThat(old.val()).hasSize((cfg.steps() + VAL_EVERY - 1) / VAL_EVERY);
        assertThat(now.val()).as("val losses").containsExactlyElementsOf(old.val());
        assertThat(now.crc()).as("the steps and the parameters").isEqualTo(old.crc());
    }
}
