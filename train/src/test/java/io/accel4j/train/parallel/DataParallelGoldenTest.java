package io.accel4j.train.parallel;

import io.accel4j.train.Gpt2Fixtures;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.fit.Learner;
import io.accel4j.train.Gpt2LearnerRuns;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.WidthGoldens;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.io.TempDir;

/**
 * DDP and ZeRO-1 on a GPT-2 {@link Learner} ({@code fit.DataParallel}, {@code BucketedDataParallel},
 * {@code ZeroSharding} stage 1) write the llm.c checkpoints and report the losses the CLI trainer's states did, bit for
 * bit (golden values), on one, two and three ranks, with the gradients averaged in buckets or whole, clipping active.
 * The goldens were recorded on the old trainer (its synchronous states, and before them its replicated states and
 * sharded states' stage 1 at 8e988ad): the first three value columns at 512 bits (an AVX-512 machine), the last three at
 * 256 (a Zen 3, 2026-12-04); see {@link WidthGoldens}.
 */
class DataParallelGoldenTest {

    /** Gpt2Fixtures' tiny model: maxT 8, V 11, padded V 16, 2 layers, 2 heads, C 8. */
    private static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        int[] t = new int[400];
        Random r = new Random(29);
        for (int i = 1; i < t.length; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(TINY.V()) : (t[i - 1] + 1) % TINY.V();
        }
        TokenFile.write(tmp.resolve("train.bin"), t);
        trainFile = TokenFile.open(tmp.resolve("train.bin"));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    private record Run(double[] losses, Path checkpoint) {}

    /** {@code cfg.steps()} steps from GPT-2's initialisation from seed 1, then a checkpoint into {@code out}. */
    private static Run run(int ranks, TrainConfig cfg, Path out) throws IOException {
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
             Learner l = Gpt2LearnerRuns.builder(TINY, cfg, ranks, data).build()) {
            Gpt2LearnerRuns.initialised(l, TINY, cfg, data, 1);
            double[] losses = Gpt2LearnerRuns.losses(l.fit(cfg.steps(), null));
            Gpt2LearnerRuns.checkpoints(l, TINY, cfg, data).save(out);
            return new Run(losses, out);
        }
    }

    /**
     * The CRC-32 of the model and state files after 4 steps, and the losses, as the trainer wrote them
     * (its replicated states and sharded states' stage 1 over {@code ZeroOptimizer}, then its synchronous states:
     * the two ran side by side, files identical byte for byte, in this test's first version). Stages 0 and 1 and the buckets
     * write the same bytes: ZeRO-1 is DDP bit for bit and the checkpoint is whole.
     */
    @ParameterizedTest(name = "stage {1} over {0} ranks, buckets of {2} bytes")
    @CsvSource({
        "1, 0, 0, e1cbba43, a275dc63, 2.3715291261672973 2.41134831905365 2.3513797760009765 2.4024001121520997, a835f473, 54a6daa3, 2.3715291261672973 2.411348342895508 2.3513797760009765 2.4024001121520997",
        "2, 0, 0, 57dc8704, 90161b02, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064, c127fe17, fe7de25d, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064",
        "2, 0, 256, 57dc8704, 90161b02, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064, c127fe17, fe7de25d, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064",
        "2, 1, 0, 57dc8704, 90161b02, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064, c127fe17, fe7de25d, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064",
        "2, 1, 256, 57dc8704, 90161b02, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064, c127fe17, fe7de25d, 2.385613441467285 2.397778034210205 2.378396511077881 2.3943703174591064",
        "3, 1, 0, 7be7ab9c, 324b1f4a, 2.392432689666748 2.3964617252349854 2.402015209197998 2.377709150314331, 8f52a1b2, 777d124b, 2.392432689666748 2.3964617252349854 2.402015209197998 2.377709150314331"})
    void theStatesWriteTheGoldenCheckpoints(int ranks, int stage, long bucketBytes, String model512, String state512,
                                            String losses512, String model256, String state256, String losses256)
            throws IOException {
        String model = WidthGoldens.pick(model512, model256);
        String state = WidthGoldens.pick(state512, state256);
        String losses = WidthGoldens.pick(losses512, losses256);
        TrainConfig cfg = TrainConfig.builder().batch(2).seq(5).steps(4).lr(1e-2f).eps(1e-5f).gradClip(0.5f)
                .weightDecay(0.1f).decayMatricesOnly(true).dataOrder(SampleOrder.Mode.SEQUENTIAL)
                .bucketBytes(bucketBytes).zeroStage(stage).build();
        Run now = run(ranks, cfg, tmp.resolve(ranks + "-" + stage + "-" + bucketBytes));
        assertThat(now.losses()).containsExactly(java.util.Arrays.stream(losses.split(" "))
                .mapToDouble(Double::parseDouble).toArray());
        assertThat(crc(now.checkpoint().resolve("model_00000004.bin"))).as("model file").isEqualTo(model);
        assertThat(crc(now.checkpoint().resolve("state_00000004.bin"))).as("state file").isEqualTo(state);
    }

    private static String crc(Path f) throws IOException {
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        crc.update(Files.readAllBytes(f));
        return String.format("%08x", crc.getValue());
    }
}
