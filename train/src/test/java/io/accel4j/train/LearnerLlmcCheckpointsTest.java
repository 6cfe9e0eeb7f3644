package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.fit.Learner;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A GPT-2 {@link Learner} on the trainer's parts ({@link LearnerGpt2Test}) writes the CLI trainer's checkpoints byte
 * for byte ({@link LearnerLlmcCheckpoints}: llm.c's model file, the state file, the pointer), starts from llm.c's
 * initialisation as the trainer does, and resumes its checkpoint to the bits of the uninterrupted run — at one rank,
 * DDP, ZeRO-1 and ZeRO-2/3 (unit-by-unit sharding, {@link LearnerGpt2Test#zeroTwoAndThreeAsTheTrainerDid}; the
 * moments' shards gathered into the whole state file and scattered back on resume) at 2 and 3 ranks. The byte-for-byte
 * part is a golden at 512 and at 256 bits ({@link WidthGoldens}): the CRC-32 of the files the trainer wrote, recorded
 * while the two ran side by side (each wrote the same bytes and resumed the other's checkpoint to the same bits).
 */
class LearnerLlmcCheckpointsTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static final long SEED = 3;
    private static final int SAVED_AT = 3;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /**
     * A run on a {@link Learner} with {@link LearnerLlmcCheckpoints}: from {@code resume}'s checkpoint (or null:
     * llm.c's initialisation from the seed) to {@code stop} steps, saving into {@code save} (or null) at SAVED_AT;
     * the final parameters' CRC-32 and the skipped steps.
     */
    private static String learner(TrainConfig cfg, int ranks, Path resume, Path save, int stop) throws IOException {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared(); // the ranks gather into it
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, Recompute.NONE, cfg.precision().activationStorage(),
                     data).build()) {
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(),
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

    /** The CRC-32 of the model, state and pointer files a run saved at SAVED_AT in {@code dir}. */
    private static String files(Path dir) throws IOException {
        StringBuilder b = new StringBuilder();
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            CRC32 c = new CRC32();
            c.update(Files.readAllBytes(dir.resolve(f)));
            b.append(String.format(b.isEmpty() ? "%08x" : " %08x", c.getValue()));
        }
        return b.toString();
    }

    /**
     * Each golden: the whole run's parameters' CRC-32 and skipped steps | the CRC-32 of the model, state and pointer
     * files saved at step 3 — the trainer's, recorded side by side.
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, ZeRO-{3}")
    @CsvSource({
        "1, bf16, 2, 0, d66e1841 0 | 71f22083 17b47d61 c30aef4a, 7a9c7667 0 | 41572899 ad8da4f7 c30aef4a",
        "1, fp16, 1, 0, 0e18b96e 0 | 92e575ae a126d313 c30aef4a, 12c2bd26 0 | 5e378213 73e324f9 c30aef4a",
        "2, fp32, 2, 0, 65a7754a 0 | 42378351 a8ae54f0 c30aef4a, c674659c 0 | 6114c1e3 310de81b c30aef4a",
        "1, fp8, 2, 0, 2d39af56 0 | fca06cda 92d03ae3 c30aef4a, 5a7b7621 0 | 73c20c4a 29c6b66b c30aef4a",
        "2, fp8, 1, 0, 0a3fd70a 0 | 7d58ef0c 7a86429c c30aef4a, b50803f1 0 | 36ed7bf7 a0181660 c30aef4a",
        "2, bf16, 2, 1, cf8d2671 0 | cf0fc48f d7e61ffc c30aef4a, 57c4c3ed 0 | da71362b 79b25d91 c30aef4a",
        "3, fp32, 1, 1, 6029cdd1 0 | 976551e9 05df0182 c30aef4a, da63e60f 0 | d2bc12ad e0b4f171 c30aef4a",
        "2, fp32, 2, 2, 0cd8b5b7 0 | fa1e5c69 ff23393f c30aef4a, 38778866 0 | ea73463b eef29abe c30aef4a",
        "3, bf16, 1, 2, 1eab437f 0 | 41cc7d0f f3a54ea3 c30aef4a, 3528afd9 0 | 1b4fbb07 3aab9bdd c30aef4a",
        "3, fp16, 2, 2, bbac5416 1 | a61381b3 8d5277d9 c30aef4a, c861c7bc 1 | cc38639c bf62d0a3 c30aef4a",
        "2, fp16, 2, 3, a8c2870d 0 | dd9d5916 faea086d c30aef4a, d59b4e30 0 | b4481a4f 4f9b1c9b c30aef4a",
        "3, fp32, 2, 3, fabfaa14 0 | 090e132a 6397c3ac c30aef4a, 141febc2 0 | d94cb50a 5c7b0dfc c30aef4a",
        "2, bf16, 1, 3, ad784458 0 | 8fc8d460 b2204643 c30aef4a, 0c4680cd 0 | 8e6c3aa4 b6be8e6e c30aef4a"})
    void theJavaApiWritesTheTrainersCheckpointsAndResumesThem(int ranks, String p, int K, int zero, String golden512,
                                                              String golden256, @TempDir Path dir)
            throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = LearnerGpt2Test.cfg(p, K, 0.5f, zero, 0);
        String whole = learner(cfg, ranks, null, dir, cfg.steps());
        assertThat(whole + " | " + files(dir)).as("the whole run | the checkpoint's files").isEqualTo(golden);
        assertThat(learner(cfg, ranks, dir, null, cfg.steps())).as("resumed from its checkpoint").isEqualTo(whole);
    }

    @ParameterizedTest(name = "saved {0} K={1}, resumed {2} K={3}")
    @CsvSource({
        "fp32, 1, fp32, 2, 'resume with the same --batch, --seq'",
        "fp8, 1, fp32, 1, resume an fp8 run with --precision fp8",
        "fp32, 1, fp8, 1, resume an fp8 run with --precision fp8"})
    void aCheckpointOfAnotherRunIsRefusedNamingTheFlags(String saved, int savedK, String resumed, int resumedK,
                                                        String message, @TempDir Path dir) throws IOException {
        learner(LearnerGpt2Test.cfg(saved, savedK, 0f, 0, 0), 1, null, dir, SAVED_AT);
        TrainConfig other = LearnerGpt2Test.cfg(resumed, resumedK, 0f, 0, 0);
        assertThatThrownBy(() -> learner(other, 1, dir, null, SAVED_AT + 1)).hasMessageContaining(message);
    }
}
