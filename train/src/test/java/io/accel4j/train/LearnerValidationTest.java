package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

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
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.lang.foreign.Arena;
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
 * The CLI trainer's validation on the Java API: {@link Learner#evaluate} over the val file's first batches (a fresh
 * sequential {@link TokenSource} each time) gives the trainer's val losses bit for bit, every few steps, and — with
 * FP8, whose forwards would record the val data's amaxes — leaves training as it was: the run's steps and parameters
 * are the trainer's with validation. At one rank and two; goldens at 512 and at 256 bits ({@link WidthGoldens}), the
 * trainer's values recorded while the two ran side by side (the same val losses, steps and parameters).
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
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 200, new Random(12));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
    }

    private static TrainConfig cfg(String p, int K) {
        TrainConfig c = LearnerGpt2Test.cfg(p, K, 0.5f, 0, 0);
        return Gpt2Fixtures.base().steps(c.steps()).gradAccum(K).gradClip(0.5f).weightDecay(0.1f).bucketBytes(0)
                .precision(c.precision()).valEvery(VAL_EVERY).valBatches(VAL_BATCHES).build();
    }

    /** The val losses, and the steps' and the final parameters' CRC ({@link LearnerGpt2Test#crc}). */
    private record Run(List<Double> val, String crc) {

        /** The steps' and parameters' CRC, then the CRC-32 of the val losses' bits. */
        String golden() {
            CRC32 c = new CRC32();
            for (double v : val) {
                c.update(java.nio.ByteBuffer.allocate(Double.BYTES).putLong(Double.doubleToLongBits(v)).array());
            }
            return crc + String.format(" %08x", c.getValue());
        }
    }

    private static Run learner(TrainConfig cfg, int ranks) throws IOException {
        try (Arena arena = Arena.ofConfined();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, Recompute.NONE, DType.FP32, data).build()) {
            try (Parallel pool = new Parallel(1); Gpt2 m = new Gpt2(Gpt2Fixtures.TINY, new CpuOps(pool), 1, 1)) {
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

    /** Each golden: the steps' and parameters' CRC-32, the skipped steps, the CRC-32 of the val losses' bits. */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}")
    @CsvSource({
        "1, fp32, 2, 8a0dec59 d35717ce 0 04bef4be, d913321c 2c6e2bd7 0 807577f3",
        "1, fp8, 1, d2d22a0a 11730f32 0 7739dec8, f8cbd7d2 db3a48d6 0 7739dec8",
        "2, fp8, 2, e85baea8 3ae3d25f 0 32427402, 0e01412d 16d81051 0 087c9201",
        "2, bf16, 1, 39022025 f9e109e6 0 57c279f2, 8e01f5b8 8821d314 0 57c279f2"})
    void theJavaApiValidatesAsTheTrainerWithoutChangingTraining(int ranks, String p, int K, String golden512,
                                                                String golden256) throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = cfg(p, K);
        Run now = learner(cfg, ranks);
        assertThat(now.val()).as("val losses").hasSize((cfg.steps() + VAL_EVERY - 1) / VAL_EVERY)
                .allSatisfy(v -> assertThat(v).isFinite().isPositive());
        assertThat(now.golden()).as("the steps, the parameters and the val losses").isEqualTo(golden);
    }
}
