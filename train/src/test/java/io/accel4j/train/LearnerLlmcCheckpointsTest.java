package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ModelStates;
import java.io.IOException;
import java.nio.file.Files;
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
 * A GPT-2 {@link Learner} on the trainer's parts ({@link LearnerGpt2Test}) writes the CLI trainer's checkpoints byte
 * for byte ({@link LearnerLlmcCheckpoints}: llm.c's model file, the state file, the pointer), starts from llm.c's
 * initialisation as the trainer does, and the two resume each other's checkpoints to the bits of an uninterrupted
 * trainer run — old and new side by side, at one rank, DDP, ZeRO-1 and ZeRO-2/3 (the trainer's unit-by-unit
 * sharding, {@link LearnerGpt2Test#zeroTwoAndThreeSideBySide}; the moments' shards gathered into the whole state
 * file and scattered back on resume) at 2 and 3 ranks.
 */
class LearnerLlmcCheckpointsTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static final long SEED = 3;
    private static final int SAVED_AT = 3;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /** The trainer's rank: {@code resume} (or null: initialised from the seed), to {@code stop} steps, saving at SAVED_AT. */
    private static String trainerRank(TrainConfig cfg, Communicator comm, Path resume, Path save, int stop)
            throws IOException {
        Precisions p = new Precisions(cfg);
        try (Parallel pool = new Parallel(1);
             Gpt2 m = LearnerGpt2Test.initialised(new Gpt2(TrainerTest.TINY, new CpuOps(pool), cfg.batch(),
                     TrainerTest.TINY.maxT(), Gpt2Options.DEFAULT.withPrecision(p.operands, cfg.precision().fp8())
                             .withActivationStorage(p.storage)));
             Trainer t = new Trainer(m, cfg, trainFile, null, comm, ModelStates::of)) {
            if (resume != null) {
                t.resume(resume);
            }
            List<StepMetrics> steps = new ArrayList<>();
            while (t.step() < stop) {
                steps.add(t.trainStep());
                if (save != null && t.step() == SAVED_AT) {
                    t.save(save);
                }
            }
            t.gatherModel(true); // ZeRO-3: the whole parameters back on every rank (below it: nothing)
            return LearnerGpt2Test.crc(steps, m.params()).substring(9); // the parameters' CRC and skips
        }
    }

    private static String trainer(TrainConfig cfg, int ranks, Path resume, Path save, int stop) throws IOException {
        if (ranks == 1) {
            return trainerRank(cfg, null, resume, save, stop);
        }
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(30))) {
            List<String> all = g.run(comm -> {
                try {
                    return trainerRank(cfg, comm, resume, save, stop);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            assertThat(all).containsOnly(all.get(0));
            return all.get(0);
        }
    }

    /** The same on a {@link Learner} with {@link LearnerLlmcCheckpoints}. */
    private static String learner(TrainConfig cfg, int ranks, Path resume, Path save, int stop) throws IOException {
        Precisions p = new Precisions(cfg);
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared(); // the ranks gather into it
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, Recompute.NONE, p.storage, data).build()) {
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, TrainerTest.TINY, cfg.batch(), cfg.seq(),
                    cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
            ck.start(null, SEED);
            if (resume != null) {
                ck.resume(resume);
            }
            List<StepMetrics> steps = new ArrayList<>();
            while (l.step() < stop) {
                steps.addAll(l.fit(1, null));
                if (save != null && l.step() == SAVED_AT) {
                    ck.save(save);
                }
            }
            return LearnerGpt2Test.crc(steps, LearnerGpt2Test.parameters(l, arena)).substring(9);
        }
    }

    private record Precisions(DType operands, DType storage) {
        Precisions(TrainConfig cfg) {
            this(cfg.precision().operands(), cfg.precision().activationStorage());
        }
    }

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, ZeRO-{3}")
    @CsvSource({"1, bf16, 2, 0", "1, fp16, 1, 0", "2, fp32, 2, 0", "1, fp8, 2, 0", "2, fp8, 1, 0", "2, bf16, 2, 1",
        "3, fp32, 1, 1", "2, fp32, 2, 2", "3, bf16, 1, 2", "3, fp16, 2, 2", "2, fp16, 2, 3", "3, fp32, 2, 3",
        "2, bf16, 1, 3"})
    void theJavaApiWritesAndResumesTheTrainersCheckpoints(int ranks, String p, int K, int zero, @TempDir Path dir)
            throws IOException {
        TrainConfig cfg = LearnerGpt2Test.cfg(p, K, 0.5f, zero, 0);
        int steps = cfg.steps();
        Path byTrainer = dir.resolve("trainer"), byLearner = dir.resolve("learner");
        String whole = trainer(cfg, ranks, null, byTrainer, steps);
        assertThat(learner(cfg, ranks, null, byLearner, steps)).as("the Java API's whole run").isEqualTo(whole);
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", Trainer.POINTER}) {
            assertThat(Files.readAllBytes(byLearner.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(byTrainer.resolve(f)));
        }
        assertThat(learner(cfg, ranks, byTrainer, null, steps)).as("the Java API from the trainer's checkpoint")
                .isEqualTo(whole);
        assertThat(trainer(cfg, ranks, byLearner, null, steps)).as("the trainer from the Java API's checkpoint")
                .isEqualTo(whole);
    }

    @ParameterizedTest(name = "saved {0} K={1}, resumed {2} K={3}")
    @CsvSource({
        "fp32, 1, fp32, 2, 'resume with the same --batch, --seq'",
        "fp8, 1, fp32, 1, resume an fp8 run with --precision fp8",
        "fp32, 1, fp8, 1, resume an fp8 run with --precision fp8"})
    void aCheckpointOfAnotherRunIsRefusedNamingTheFlags(String saved, int savedK, String resumed, int resumedK,
                                                        String message, @TempDir Path dir) throws IOException {
        trainer(LearnerGpt2Test.cfg(saved, savedK, 0f, 0, 0), 1, null, dir, SAVED_AT);
        TrainConfig other = LearnerGpt2Test.cfg(resumed, resumedK, 0f, 0, 0);
        assertThatThrownBy(() -> learner(other, 1, dir, null, SAVED_AT + 1)).hasMessageContaining(message);
    }
}
