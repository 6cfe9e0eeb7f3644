package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.optim.Sgd;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * bf16 working weights ({@code --bf16-params}) on the Java API: a GPT-2 {@link Learner} on the trainer's parts
 * ({@link LearnerGpt2Test#builder}) with {@link LearnerBuilder#parameterStorage} BF16 ({@code fit.Bf16ParamSync} over
 * {@code optim.Bf16StoreAdamW}, or {@code optim.OffloadedBf16AdamW} with {@code offloadOptimizer()}) at one rank and
 * DDP (2 and 3 ranks), fp32/16-bit gradients, fp32/bf16/fp16 (loss scaling, and every step overflowing)/fp8 operands
 * with the precision's activation storage, recomputation, K 1–2, clipping.
 *
 * <p>Goldens: the CRC-32 of every step's loss, norm, rate, scale and skip, of the final fp32 master and of the final
 * bf16 working weights, the val losses, the memory figures and the CRC-32 of the llm.c checkpoint files are the values
 * the CLI's old trainer path produced for the same runs (recorded at e32d1fe, where this test ran that trainer side by
 * side with the learner and asserted equal bits before each value was taken), one per vector width
 * ({@link WidthGoldens}; the memory figures do not depend on it). The trainer averaged the gradients whole (the CLI
 * refuses --bucket-mb with --bf16-params), so the learner's run is its bits with {@code bucketBytes(0)}, and bucketed
 * at 2 ranks (where a ring's average is {@code (a+b)/2} however the vector is cut); at 3 ranks buckets change the
 * order of the ring's additions ({@code fit.BucketedDataParallel}) and the last bits with it. The learner's llm.c
 * checkpoints ({@link LearnerLlmcCheckpoints}: the master as the model file) resume, offloaded or not the other way,
 * to an uninterrupted run's bits; so does {@link Learner#save}/{@link Learner#resume}. What does not compose yet is
 * refused before any allocation.
 */
class LearnerBf16ParamsTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static TokenFile valFile;
    private static final long INIT_SEED = 3;
    private static final int SAVED_AT = 3;

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

    /** {@link LearnerGpt2Test#cfg} with {@code gradients} storage and the learner's buckets left to the caller. */
    private static TrainConfig cfg(String p, int K, float clip, DType gradients) {
        TrainConfig c = LearnerGpt2Test.cfg(p, K, clip, 0, 0);
        return c.toBuilder().precision(c.precision().withGradients(gradients)).build();
    }

    /** The run's step CRC, master CRC and working weights' CRC: "steps master skipped working". */
    private static String crc(List<StepMetrics> steps, MemorySegment master, MemorySegment working) {
        CRC32 w = new CRC32();
        w.update(working.asByteBuffer());
        return LearnerGpt2Test.crc(steps, master) + String.format(" %08x", w.getValue());
    }

    // ---- the Java API ----

    /** The learner of {@code cfg} with bf16 working weights: the builder calls the CLI makes for --bf16-params. */
    static LearnerBuilder builder(TrainConfig cfg, int ranks, boolean offload, long buckets, TokenSource data) {
        return builder(cfg, Recompute.NONE, ranks, offload, buckets, data);
    }

    private static LearnerBuilder builder(TrainConfig cfg, Recompute recompute, int ranks, boolean offload,
                                          long buckets, TokenSource data) {
        LearnerBuilder b = LearnerGpt2Test.builder(cfg, ranks, recompute, cfg.precision().activationStorage(), data)
                .gradientStorage(cfg.precision().gradients()).parameterStorage(DType.BF16).seed(cfg.seed())
                .bucketBytes(buckets);
        return offload ? b.offloadOptimizer() : b;
    }

    /** The same run on a {@link Learner}, checkpoints through {@link LearnerLlmcCheckpoints}. */
    private static String learner(TrainConfig cfg, int ranks, boolean offload, long buckets, Path resume, Path save,
                                  int stop) throws IOException {
        return learner(cfg, Recompute.NONE, ranks, offload, buckets, resume, save, stop);
    }

    private static String learner(TrainConfig cfg, Recompute recompute, int ranks, boolean offload, long buckets,
                                  Path resume, Path save, int stop) throws IOException {
        try (Arena arena = Arena.ofShared(); // the ranks' threads gather into it
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, recompute, ranks, offload, buckets, data).build()) {
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(),
                    cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
            ck.start(null, INIT_SEED);
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
            return crc(steps, LearnerGpt2Test.parameters(l, arena), working(l, arena));
        }
    }

    /** The first rank's bf16 working weights, widened. */
    private static MemorySegment working(Learner l, Arena arena) {
        MemorySegment w = arena.allocate(l.network().table().count() * Float.BYTES, 64);
        l.network().copyParamsToHost(w);
        return w;
    }

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, gradients {4}, offload {5}, buckets {6}, recompute {7}")
    @CsvSource({
        "1, bf16, 2, 0.5, FP32, false, 0, NONE, 642b1c1e 2fc0c8ba 0 53e7c706, dde0f852 79b1478f 0 53e7c706",
        "1, fp32, 1, 1, FP32, false, 0, NONE, cf40cae3 487a5680 0 689da56c, be3f1a17 6d05ed25 0 e8b20794",
        "1, fp16, 2, 0.5, FP32, false, 0, GELU, 9f592409 4efdd1de 1 a1defece, 19fcf90d ef4aee16 1 b01093c5",
        "1, fp16big, 1, 0, FP32, false, 0, NONE, 2be77ece df649820 8 df649820, 2be77ece df649820 8 df649820",
        "1, bf16, 2, 0.5, BF16, false, 0, LAYER, 2332fb0a 086e8f2f 0 6f812f5f, 9c4f72aa 1cf0ba23 0 6f812f5f",
        "1, fp16, 1, 1, FP16, false, 0, NONE, a8db48d9 0e23f0d8 1 3b324f2c, 4625c7ce 4a1122b5 1 3b324f2c",
        "1, bf16, 2, 0.5, FP32, true, 0, GELU, 6ed524aa 5cc9729a 0 cc920aba, 0447b4e2 4dcd454c 0 cc920aba",
        "1, bf16, 1, 0, BF16, true, 0, NONE, 71948374 69a22670 0 4e88945c, e6cbca5b 4bd00239 0 4e88945c",
        "1, fp8, 2, 0.5, FP32, false, 0, NONE, 8e4c20b4 f94f3ad9 0 3e9438c7, d8b781b6 bba1c2cd 0 1116698b",
        "2, bf16, 2, 0.5, FP32, false, 0, NONE, 09b6f5e1 b53a8ff0 0 60906f03, 89236580 a964528f 0 34487491",
        "2, bf16, 1, 0.5, FP32, false, 256, LAYER, 1840fb08 35c89e14 0 72874261, 443bf2da d458116f 0 72874261",
        "2, fp16, 2, 1, BF16, false, 0, NONE, d418f701 4feeb976 1 28c97133, 545ba983 218137df 1 28c97133",
        "2, bf16, 2, 0, FP32, true, 256, NONE, 24df9e7e 1f603244 0 285d298a, 01cc063b b1f25b39 0 285d298a",
        "3, bf16, 1, 0.5, FP32, false, 0, GELU, f648ce64 e6ed3a18 0 da673405, 3a0e9124 efab79f8 0 da673405",
        "3, fp32, 2, 0, BF16, false, 0, NONE, aac1c9a5 903c9537 0 e44d9867, d5b9cf27 e7d3d07d 0 c00fc9df",
        "3, bf16, 2, 0.5, FP32, true, 0, NONE, a4da97c7 dbabdbf4 0 47be41b6, 8adc83c3 57ea6ef7 0 7967dea2"})
    void theJavaApiTrainsBf16WorkingWeightsAsTheTrainersGoldens(int ranks, String p, int K, float clip,
                                                               DType gradients, boolean offload, long buckets,
                                                               Recompute recompute, String golden512,
                                                               String golden256) throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = cfg(p, K, clip, gradients);
        assertThat(learner(cfg, recompute, ranks, offload, buckets, null, null, cfg.steps())).isEqualTo(golden);
        String[] crcs = golden.split(" "); // steps, master, skipped, working
        if (p.equals("fp16big")) { // no update: the master is the initial weights rounded, as the store
            assertThat(crcs[2]).as("every step overflows and is skipped").isEqualTo("8");
            assertThat(crcs[1]).as("the master").isEqualTo(crcs[3]);
        } else {
            assertThat(crcs[1]).as("the master keeps what bf16 rounds away").isNotEqualTo(crcs[3]);
        }
    }

    /**
     * The llm.c checkpoint at step 3 (the fp32 master as the model file, m and v in the state file, the pointer) is
     * what the trainer wrote (the CRC-32 of each file, recorded when the two were compared byte for byte), and it
     * resumes, offloaded or not the other way, to the uninterrupted run's bits: losses, master and the bf16 weights
     * rounded from the master as update 3 rounded them (fp16big: the store rounded to nearest, no update having been
     * made). Golden: "the whole run | the model, state and pointer files' CRC-32".
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, gradients {3}, offload {4}")
    @CsvSource({
        "1, bf16, 2, FP32, false, 642b1c1e 2fc0c8ba 0 53e7c706 | b6246e91 0a856c0d c30aef4a, "
            + "dde0f852 79b1478f 0 53e7c706 | 5cf147d8 557ca7ed c30aef4a",
        "1, bf16, 1, BF16, true, 9e1327c7 ef7fa16a 0 c91236ea | cffb0e23 7f256ada c30aef4a, "
            + "c4ddbe8e 9b5d7d65 0 c91236ea | a16793bf 079f04ef c30aef4a",
        "1, fp16big, 1, FP32, false, 2be77ece df649820 8 df649820 | cfd5d1f2 ebcb7d2e c30aef4a, "
            + "2be77ece df649820 8 df649820 | cfd5d1f2 ebcb7d2e c30aef4a",
        "2, bf16, 2, FP32, false, 09b6f5e1 b53a8ff0 0 60906f03 | 6c4fd0bd 2adc7fce c30aef4a, "
            + "89236580 a964528f 0 34487491 | e9a56c7a 4f233cc4 c30aef4a",
        "2, fp16, 1, BF16, true, c0c35d25 a6b6b06a 1 6c296b50 | 1cd5da8e 644da0b0 c30aef4a, "
            + "cb2394b2 105ca801 1 a189cc2f | 98580557 9e17eaec c30aef4a",
        "3, bf16, 1, FP32, false, cf76fa23 a66dbc60 0 bcdb0675 | f6ff057c 9ba43504 c30aef4a, "
            + "38cdf896 b51cdd7d 0 bcdb0675 | f202da0b e0189777 c30aef4a"})
    void theJavaApiWritesTheTrainersCheckpointsAndResumesThem(int ranks, String p, int K, DType gradients,
                                                              boolean offload, String golden512, String golden256,
                                                              @TempDir Path dir) throws IOException {
        String[] golden = WidthGoldens.pick(golden512, golden256).split(" \\| ");
        TrainConfig cfg = cfg(p, K, 0.5f, gradients);
        int steps = cfg.steps();
        Path byLearner = dir.resolve("learner");
        String whole = learner(cfg, ranks, offload, 0, null, byLearner, steps);
        assertThat(whole).as("the Java API's whole run").isEqualTo(golden[0]);
        assertThat(fileCrcs(byLearner)).as("model, state and pointer files").isEqualTo(golden[1]);
        String rest = whole.substring(9); // the parameters' CRCs (the steps' differ: the first three are not run)
        assertThat(learner(cfg, ranks, !offload, 0, byLearner, null, steps).substring(9))
                .as("the Java API from its checkpoint, offloaded or not the other way").isEqualTo(rest);
    }

    /** The CRC-32 of the step-3 checkpoint's model, state and pointer files in {@code dir}. */
    private static String fileCrcs(Path dir) throws IOException {
        StringBuilder b = new StringBuilder();
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            CRC32 c = new CRC32();
            c.update(Files.readAllBytes(dir.resolve(f)));
            b.append(b.isEmpty() ? "" : " ").append(String.format("%08x", c.getValue()));
        }
        return b.toString();
    }

    /**
     * {@link Learner#save} and {@link Learner#resume}: the master as the model, m and v as the state; and the llm.c
     * model file is the fp32 master (what a sampler or an fp32 run loads), not the bf16 working copy.
     */
    @ParameterizedTest(name = "{0} ranks, gradients {1}, offload {2}")
    @CsvSource({"1, FP32, false", "1, BF16, true", "2, FP32, true", "2, BF16, false"})
    void aLearnersOwnCheckpointResumesBitForBit(int ranks, DType gradients, boolean offload, @TempDir Path dir)
            throws IOException {
        TrainConfig cfg = cfg("bf16", 2, 0.5f, gradients);
        String whole = learner(cfg, ranks, offload, 0, null, null, cfg.steps());
        try (Arena arena = Arena.ofShared();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(),
                    cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
            ck.start(null, INIT_SEED);
            l.fit(SAVED_AT, null);
            l.save(dir);
            ck.save(dir.resolve("llmc"));
            MemorySegment master = LearnerGpt2Test.parameters(l, arena);
            MemorySegment model = io.accel4j.train.checkpoint.LlmcCheckpoint.read(
                    CheckpointFiles.latest(dir.resolve("llmc")).model(), arena).params();
            assertThat(model.asSlice(0, master.byteSize()).mismatch(master)).as("the llm.c model file vs the master")
                    .isEqualTo(-1);
            assertThat(master.mismatch(working(l, arena))).as("the master keeps what bf16 rounds away")
                    .isNotEqualTo(-1);
        }
        try (Arena arena = Arena.ofShared();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, !offload, 0, data).build()) {
            assertThat(l.stateNames()).containsExactly("m", "v");
            l.resume(dir);
            l.fit(cfg.steps() - SAVED_AT, null);
            assertThat(crc(l.history(), LearnerGpt2Test.parameters(l, arena), working(l, arena)).substring(9))
                    .isEqualTo(whole.substring(9));
        }
    }

    private static final int VAL_EVERY = 2;
    private static final int VAL_BATCHES = 3;

    /**
     * The trainer's val losses at steps 0, 2, 4 and 6 (before the step), over the bf16 working weights: the same at
     * both rows and both widths (the rows' working weights are the same bits, their 4th CRC).
     */
    private static final String VAL_LOSSES = "[2.3945869843165077, 2.372631581624349, 2.3349917491277057, "
            + "2.266231858730316]";

    /**
     * The CLI trainer's validation on the Java API ({@link LearnerValidationTest}'s way: {@link Learner#evaluate} over
     * the val file's first batches) over bf16 working weights: the trainer's val losses bit for bit
     * ({@link #VAL_LOSSES}), and training as it did (the goldens, as in
     * {@link #theJavaApiTrainsBf16WorkingWeightsAsTheTrainersGoldens}).
     */
    @ParameterizedTest(name = "{0} ranks, K={1}, offload {2}")
    @CsvSource({
        "1, 2, false, 642b1c1e 2fc0c8ba 0 53e7c706, dde0f852 79b1478f 0 53e7c706",
        "2, 1, true, e19c737d b0dbc68f 0 53e7c706, 938676b6 ffdf5f62 0 53e7c706"})
    void theJavaApiValidatesAsTheTrainersGoldens(int ranks, int K, boolean offload, String golden512,
                                                 String golden256) throws IOException {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = cfg("bf16", K, 0.5f, DType.FP32).toBuilder().valEvery(VAL_EVERY).valBatches(VAL_BATCHES)
                .build();
        try (Arena arena = Arena.ofShared();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(), cfg.gradAccum(),
                    data.loaders(), CheckpointFiles.Retention.LATEST).start(null, INIT_SEED);
            List<StepMetrics> steps = new ArrayList<>();
            List<Double> val = new ArrayList<>();
            for (int s = 0; s < cfg.steps(); s++) {
                if (s % VAL_EVERY == 0) {
                    try (TokenSource v = new TokenSource(TokenShards.of(valFile),
                            io.accel4j.train.data.SampleOrder.Mode.SEQUENTIAL, 0, 1)) {
                        val.add(l.evaluate(v.open(0, 1, cfg.batch(), cfg.seq()), VAL_BATCHES));
                    }
                }
                steps.addAll(l.fit(1, null));
            }
            assertThat(val).hasSize((cfg.steps() + VAL_EVERY - 1) / VAL_EVERY);
            assertThat(val.toString()).as("val losses").isEqualTo(VAL_LOSSES);
            assertThat(crc(steps, LearnerGpt2Test.parameters(l, arena), working(l, arena))).isEqualTo(golden);
        }
    }

    /** The trainer's start-up memory line's accounting part for this model (0.0 MiB: a tiny one). */
    private static final String ACCOUNTING = "ZeRO-0 over %d rank%s (fp32 model states): per rank params 0.0 MiB + "
            + "gradients 0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB";

    /**
     * The start-up memory lines' figures, as the trainer printed them (the same at either vector width): its model
     * states' bytes, its model's and its activations'.
     */
    @ParameterizedTest(name = "{0} ranks, gradients {1}, offload {2}")
    @CsvSource({
        "1, FP32, false, 31456, 30320, 14480",
        "1, BF16, true, 32448, 31312, 14480",
        "2, FP32, true, 31456, 30320, 14480",
        "2, BF16, false, 32448, 31312, 14480"})
    void theMemoryFiguresAreTheTrainers(int ranks, DType gradients, boolean offload, long modelStates, long model,
                                        long activations) {
        TrainConfig cfg = cfg("bf16", 1, 0f, gradients);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            assertThat(l.zeroMemory().describe(l.modelStateBytes(), l.workingBytes()))
                    .isEqualTo(String.format(ACCOUNTING, ranks, ranks == 1 ? "" : "s"));
            assertThat(new long[] {l.modelStateBytes(), l.modelBytes(), l.network().activationBytes()})
                    .as("model states, model, activations").containsExactly(modelStates, model, activations);
            assertThat(l.optimizerStateBytes()).as("master, m and v").isEqualTo(12 * l.network().table().count());
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "zero | parameterStorage(BF16) does not go with zero(1) yet",
        "tensor | parameterStorage(BF16) does not go with tensorParallel(2) yet",
        "pipeline | parameterStorage(BF16) does not go with pipeline(2, …) yet",
        "sgd | parameterStorage(BF16) does not go with optimizer(Sgd) yet",
        "fp16 | parameterStorage(FP16): the working weights are stored in FP32 or BF16"})
    void whatDoesNotComposeIsRefusedBeforeAllocation(String what, String message) {
        TrainConfig cfg = cfg("bf16", 1, 0f, DType.FP32);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1)) {
            LearnerBuilder b = builder(cfg, 2, false, 0, data);
            LearnerBuilder bad = switch (what) {
                case "zero" -> b.zero(1);
                case "tensor" -> b.tensorParallel(2);
                case "pipeline" -> b.pipeline(2, 2, io.accel4j.pipeline.Schedule.GPIPE);
                case "sgd" -> b.optimizer(Sgd.of(0.9f, 0f));
                default -> b.parameterStorage(DType.FP16);
            };
            assertThatThrownBy(bad::build).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining(message);
        }
    }

    /** A model without a unit a scope opens and closes in one backward has nothing to store in bf16: refused. */
    @Test
    void aTreeWithoutUnitsIsRefusedNamingTheFix() {
        TrainConfig cfg = cfg("bf16", 1, 0f, DType.FP32);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1)) {
            LearnerBuilder b = Learner.of(() -> new io.accel4j.nn.Sequential("mlp",
                            io.accel4j.nn.Linear.of("fc", Gpt2Fixtures.TINY.V(), Gpt2Fixtures.TINY.V())))
                    .features(Gpt2Fixtures.TINY.V()).classes(Gpt2Fixtures.TINY.V()).batch(2, 1)
                    .parameterStorage(DType.BF16).data(data);
            assertThatThrownBy(b::build).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("bf16 parameter storage keeps the parameters of the units a UnitScope");
        }
    }
}
