package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CLI trainer's GPT-2 rank put together from the Java API's parts — the model from {@link Gpt2Blocks} in llm.c's
 * parameter order, the trainer's token files as a {@link TokenSource}, its AdamW ({@link TrainConfig#adamw}), its
 * learning-rate schedule, fp16's loss scaling ({@link LearnerBuilder#lossScaling}), the strategy {@code Learner}
 * picks — trains bit for bit as the old trainer did: the same CRC-32 of every step's loss, norm, rate, scale and skip
 * and of the final parameters. Every row is a golden at 512 and at 256 bits ({@link WidthGoldens}):
 * {@link StepLoopGoldenTest}'s (recorded from the trainer before the step was shared), and the values the trainer
 * produced, recorded while it ran side by side with the {@code Learner} (equal bits) for recomputation, 16-bit
 * activation storage, ZeRO-1, ZeRO-2/3 (both unit by unit over GPT-2's own unit scopes, as the trainer sharded), 16-bit
 * gradients and the offloaded optimizer. Not here: the async workers ({@link LearnerAsyncTest}); checkpoints and
 * validation are {@link LearnerLlmcCheckpointsTest}'s and {@link LearnerValidationTest}'s.
 */
class LearnerGpt2Test {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static final long INIT_SEED = 3;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    private static Precision precision(String p) {
        return switch (p) {
            case "fp32" -> Precision.FP32;
            case "bf16" -> Precision.of(DType.BF16);
            case "fp16" -> new Precision(DType.FP16, 0x1p16f, 2);
            case "fp16big" -> new Precision(DType.FP16, 0x1p40f, 1000);
            case "fp8" -> Precision.fp8(new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0,
                    DelayedScaling.Algorithm.MAX));
            default -> throw new IllegalArgumentException(p);
        };
    }

    static TrainConfig cfg(String p, int K, float clip, int zero, long buckets) {
        return Gpt2Fixtures.base().steps(8).gradAccum(K).gradClip(clip).weightDecay(0.1f).zeroStage(zero)
                .bucketBytes(buckets).precision(precision(p)).build();
    }

    /** The steps' and the parameters' CRC-32 and the skipped steps, as {@link StepLoopGoldenTest} prints them. */
    static String crc(List<StepMetrics> steps, MemorySegment params) {
        CRC32 s = new CRC32();
        int skipped = 0;
        for (StepMetrics m : steps) {
            s.update(java.nio.ByteBuffer.allocate(29).putLong(Double.doubleToLongBits(m.trainLoss()))
                    .putLong(Double.doubleToLongBits(m.gradNorm())).putFloat(m.lr()).putFloat(m.lossScale())
                    .putInt(m.skippedSteps()).put((byte) (m.skipped() ? 1 : 0)).array());
            skipped = m.skippedSteps();
        }
        CRC32 p = new CRC32();
        p.update(params.asByteBuffer());
        return String.format("%08x %08x %d", s.getValue(), p.getValue(), skipped);
    }

    /** The trainer's initial parameters: the TINY model initialised from {@link #INIT_SEED}, llm.c's layout. */
    private static MemorySegment initial(Arena arena) {
        try (Parallel pool = new Parallel(1); Gpt2 m = new Gpt2(Gpt2Fixtures.TINY, new CpuOps(pool), 1, 1)) {
            m.initialise(INIT_SEED);
            MemorySegment host = arena.allocate(m.layout().count() * Float.BYTES, 64);
            m.copyParamsToHost(host);
            return host;
        }
    }

    /** The Java API's parts for the trainer's {@code cfg}: one thread a rank, as the trainer's goldens were run. */
    static LearnerBuilder builder(TrainConfig cfg, int ranks, Recompute recompute, DType storage,
                                          TokenSource data) {
        // the goldens were recorded at the builder's default seed (bf16 working weights' rounding seed derives from it)
        return Gpt2Learners.of(Gpt2Fixtures.TINY, cfg).seed(1337).recompute(recompute).activationStorage(storage)
                .ranks(ranks).threads(ranks).zero(cfg.zeroStage()).bucketBytes(ranks > 1 ? cfg.bucketBytes() : 0)
                .data(data);
    }

    /** The run on the Java API's parts. */
    private static String learner(TrainConfig cfg, int ranks, Recompute recompute, DType storage) {
        try (Arena arena = Arena.ofShared(); // the ranks' threads gather into it
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, recompute, storage, data).build()) {
            l.loadParameters(initial(arena));
            List<StepMetrics> steps = l.fit(cfg.steps(), null);
            return crc(steps, parameters(l, arena));
        }
    }

    /**
     * The learner's whole parameters on the host (gathered: ZeRO-2/3's live in the units' shards), {@code arena}
     * shared (the ranks' threads write it).
     */
    static MemorySegment parameters(Learner l, Arena arena) {
        MemorySegment host = arena.allocate(l.wholeTable().count() * Float.BYTES, 64);
        l.gatherParameters(host);
        return host;
    }

    /** {@code m} initialised from {@link #INIT_SEED}, the goldens' initial parameters. */
    static Gpt2 initialised(Gpt2 m) {
        m.initialise(INIT_SEED);
        return m;
    }

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, buckets {4}")
    @CsvSource({ // StepLoopGoldenTest's rows without ZeRO-2/3
        "1, fp32, 2, 0.5, 0, 8a0dec59 d35717ce 0, d913321c 2c6e2bd7 0",
        "1, bf16, 2, 0, 0, 8572d5e8 14079f18 0, 3d6d2d37 6f738c5a 0",
        "1, fp16, 1, 1, 0, db5f8dfa 5bbd88bd 0, cadd950a c369ac97 0",
        "1, fp16big, 1, 0, 0, 6d64076c f056037d 8, 6d64076c f056037d 8",
        "1, fp8, 2, 0.5, 0, 2cef83f3 2d39af56 0, c005d9df 5a7b7621 0",
        "2, fp16, 2, 0.5, 256, 42d095c0 8edc049e 0, 3ed1a3f5 b8384cc7 0",
        "2, fp8, 1, 0, 0, 8907256f d8b6c3c4 0, 24e77a4b ef2d7d83 0"})
    void theJavaApiTrainsGpt2AsTheTrainersGoldens(int ranks, String p, int K, float clip, long buckets,
                                                  String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        assertThat(learner(cfg(p, K, clip, 0, buckets), ranks, Recompute.NONE, DType.FP32)).isEqualTo(golden);
    }

    /**
     * The trainer's values for these rows, recorded side by side with it. The 3-rank rows pin the bucketed
     * all-reduce: a ring adds an element's 3 terms in an order that depends on where it falls in a call's chunks, so
     * these matched only because {@code Learner}'s buckets over GPT-2's own unit scopes issue the trainer's calls (a
     * bucket of 256 bytes: every layer; 0: one all-reduce).
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, ZeRO-{4}, recompute {5}, activations {6}, buckets {7}")
    @CsvSource({
        "1, bf16, 2, 0.5, 0, GELU, BF16, 0, 9fdcb115 3003cf58 0, 861c4ea4 6fa900f9 0",
        "1, fp32, 1, 1, 0, LAYER, FP32, 0, ca60768b f304320c 0, 2d6f76fc 2561d20b 0",
        "1, fp16, 2, 0.5, 0, LAYER, FP16, 0, 271f5fb2 d67b7799 1, 797a6f56 9e685b93 1",
        "2, fp32, 2, 0.5, 1, NONE, FP32, 256, 4e40e9ae 65a7754a 0, ca230ac3 c674659c 0",
        "2, bf16, 1, 0, 1, GELU, BF16, 0, 30a4f8de 02182e8f 0, 78456c05 cb95bd65 0",
        "3, fp32, 2, 0, 1, NONE, FP32, 256, 3ac2400a 66608d21 0, 05e058d7 138b1799 0",
        "3, bf16, 1, 0.5, 0, NONE, BF16, 256, ec7c696c 3bac3889 0, 45a0b2e9 bb4d1228 0",
        "3, fp32, 2, 0.5, 0, NONE, FP32, 0, 6e8bc7ac a04c46fe 0, 2fb3e544 fe053faf 0",
        "3, fp32, 1, 0, 0, NONE, FP32, 26214400, 5a44027b 3b806100 0, a05d4662 3de807e1 0"})
    void theJavaApiTrainsGpt2AsTheTrainerDid(int ranks, String p, int K, float clip, int zero, Recompute recompute,
                                             DType storage, long buckets, String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        assertThat(learner(cfg(p, K, clip, zero, buckets), ranks, recompute, storage)).isEqualTo(golden);
    }

    /** StepLoopGoldenTest's ZeRO-2/3 rows (the trainer's sharded states), on the Java API's parts. */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, ZeRO-{4}")
    @CsvSource({
        "2, fp32, 2, 0.5, 2, 932feb80 0cd8b5b7 0, 4f056fbc 38778866 0",
        "2, fp16, 1, 1, 3, eb3fed09 3dbcba15 1, 9cce0339 8a331de5 1",
        "3, bf16, 2, 0, 2, ef8601f7 10487281 0, ecdb44b6 aa618581 0"})
    void zeroTwoAndThreeAsTheTrainersGoldens(int ranks, String p, int K, float clip, int zero, String golden512,
                                             String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        assertThat(learner(cfg(p, K, clip, zero, 0), ranks, Recompute.NONE, DType.FP32)).isEqualTo(golden);
    }

    /**
     * ZeRO-2 and 3 as the trainer's were (its sharded states over {@code ShardedWeights}; the values recorded side by
     * side with it): a GPT-2 {@code Learner} shards unit by unit over GPT-2's own unit scopes
     * ({@code fit.ShardedModel}: the embeddings and the final LayerNorm in buffers of their own, the blocks chained),
     * so each unit's reduce-scatter, the micro-batches' accumulation of the averaged shards (K 2) and the norm over
     * the shards are the trainer's calls. These rows differ from the whole-buffer reduce-scatter
     * ({@code ZeroSharding} stage 2) in the last bits.
     * {@code fp16big}: every step overflows and is skipped.
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, ZeRO-{4}, recompute {5}, activations {6}")
    @CsvSource({
        "2, fp32, 2, 0.5, 2, NONE, FP32, 932feb80 0cd8b5b7 0, 4f056fbc 38778866 0",
        "3, fp32, 2, 0.5, 2, NONE, FP32, ab323b3a fabfaa14 0, 6e585bbb 141febc2 0",
        "3, fp16, 2, 1, 2, NONE, FP32, a728adee c9aeafaf 2, cf926806 a263300a 2",
        "2, bf16, 1, 0.5, 2, GELU, BF16, 66dd8b6e a680660d 0, d5eb4c99 4ac2246a 0",
        "2, fp16big, 1, 0, 2, NONE, FP32, d7f177df f056037d 8, d7f177df f056037d 8",
        "2, fp32, 2, 0.5, 3, NONE, FP32, 932feb80 0cd8b5b7 0, 4f056fbc 38778866 0",
        "3, fp32, 2, 0.5, 3, NONE, FP32, ab323b3a fabfaa14 0, 6e585bbb 141febc2 0",
        "3, bf16, 1, 0.5, 3, LAYER, BF16, b18c6fe1 9962cc43 0, 9b8fb53c 6940262c 0",
        "2, fp16, 2, 0.5, 3, NONE, FP16, e2eba895 a8c2870d 0, ff7c2a62 d59b4e30 0",
        "3, fp16big, 2, 0, 3, NONE, FP32, 64ffb7dc f056037d 8, 64ffb7dc f056037d 8"})
    void zeroTwoAndThreeAsTheTrainerDid(int ranks, String p, int K, float clip, int zero, Recompute recompute,
                                        DType storage, String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        assertThat(learner(cfg(p, K, clip, zero, 0), ranks, recompute, storage)).isEqualTo(golden);
    }

    /** A resumed run reads on where the token source left (it skips the batches read) and ends on the same bits. */
    @ParameterizedTest(name = "{0} ranks")
    @CsvSource({"1", "2"})
    void aResumedRunOnTheTokenSourceEndsOnTheSameBits(int ranks, @TempDir Path dir) throws IOException {
        TrainConfig cfg = cfg("bf16", 2, 0.5f, 0, 0);
        String whole = learner(cfg, ranks, Recompute.NONE, DType.BF16);
        try (Arena arena = Arena.ofConfined();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, Recompute.NONE, DType.BF16, data).build()) {
            l.loadParameters(initial(arena));
            l.fit(3, null);
            l.save(dir);
        }
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, Recompute.NONE, DType.BF16, data).build()) {
            l.resume(dir);
            l.fit(cfg.steps() - 3, null);
            assertThat(l.step()).isEqualTo(cfg.steps());
            assertThat(crc(l.history(), l.network().params()).substring(9))
                    .as("the parameters after the resumed run").isEqualTo(whole.substring(9));
        }
    }

    /**
     * The token files' loaders measure the steps' data wait, so a {@code Learner} over a {@link TokenSource} reports
     * {@code data_ms} as the trainer does: the difference of the rank's {@code DataLoader.waitNanos} over the step
     * (a time: only its presence and range can be checked; {@code fit.LearnerDataWaitTest} checks the arithmetic).
     */
    @org.junit.jupiter.api.Test
    void aTokenSourceReportsTheStepsDataWait() {
        TrainConfig cfg = cfg("fp32", 2, 0f, 0, 0);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, 2, Recompute.NONE, DType.FP32, data).build()) {
            assertThat(l.fit(3, null)).hasSize(3).allSatisfy(m -> assertThat(m.dataMs()).isFinite()
                    .isGreaterThanOrEqualTo(0).isLessThanOrEqualTo(m.stepMs()));
        }
    }

    @org.junit.jupiter.api.Test
    void aTokenSourceNeedsAThread() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new TokenSource(TokenShards.of(trainFile),
                SampleOrder.Mode.SEQUENTIAL, 1, 0)).hasMessageContaining("at least 1 thread, got 0");
    }

    /**
     * 16-bit gradient storage ({@code fit.HalfGradientSync}) and the optimizer offloaded to the host
     * ({@code offloadOptimizer()}): the trainer's values (its 16-bit gradient states and its offloaded strategy),
     * recorded side by side with it.
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, gradients {3}, offload {4}")
    @CsvSource({
        "1, bf16, 2, BF16, false, fcebe8e9 4c8c55df 0, ecc878ca e2fa117f 0",
        "2, bf16, 1, BF16, false, c89cb539 6fa00438 0, 7aedbddd 23048d29 0",
        "1, fp16, 2, FP16, false, 218b0d45 b1e9767b 2, c96ef27f c0a8be78 2",
        "1, fp32, 2, FP32, true, 8a0dec59 d35717ce 0, d913321c 2c6e2bd7 0",
        "2, bf16, 2, FP32, true, 01aa258e 00679db9 0, ef06de29 5129afe2 0"})
    void halfGradientsAndOffloadAsTheTrainerDid(int ranks, String p, int K, DType gradients, boolean offload,
                                                String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = cfg(p, K, 0.5f, 0, 0);
        TrainConfig half = Gpt2Fixtures.base().steps(cfg.steps()).gradAccum(K).gradClip(0.5f).weightDecay(0.1f)
                .bucketBytes(0).precision(cfg.precision().withGradients(gradients)).build();
        String now;
        try (Arena arena = Arena.ofConfined();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), half.dataOrder(), half.seed(), 1)) {
            LearnerBuilder b = builder(half, ranks, Recompute.NONE, DType.FP32, data).gradientStorage(gradients);
            try (Learner l = (offload ? b.offloadOptimizer() : b).build()) {
                l.loadParameters(initial(arena));
                now = crc(l.fit(half.steps(), null), l.network().params());
            }
        }
        assertThat(now).isEqualTo(golden);
    }
}
