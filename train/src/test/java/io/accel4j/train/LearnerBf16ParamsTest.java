package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.optim.Sgd;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.Bf16ParamStates;
import io.accel4j.train.parallel.ModelStates;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
 * ({@link LearnerGpt2Test#builder}) with {@link LearnerBuilder#parameterStorage} BF16 trains bit for bit as
 * {@link Trainer} over {@code Gpt2Options.withParameterStorage(BF16)} with the CLI's strategy
 * ({@code ModelStates.of}'s {@code Bf16ParamStates}, or {@link Bf16ParamStates#offloaded()} with
 * {@code offloadOptimizer()}): the same CRC-32 of every step's loss, norm, rate, scale and skip, of the final fp32
 * master and of the final bf16 working weights, side by side at one rank and DDP (2 and 3 ranks), fp32/16-bit
 * gradients, fp32/bf16/fp16 (loss scaling, and every step overflowing)/fp8 operands with the precision's activation
 * storage, recomputation, K 1–2, clipping. The trainer averages the gradients whole (the CLI refuses --bucket-mb with
 * --bf16-params), so the learner's run is its bits with {@code bucketBytes(0)}, and bucketed at 2 ranks (where a
 * ring's average is {@code (a+b)/2} however the vector is cut); at 3 ranks buckets change the order of the ring's
 * additions ({@code fit.BucketedDataParallel}) and the last bits with it. Its llm.c checkpoints ({@link LearnerLlmcCheckpoints}: the
 * master as the model file) are the trainer's byte for byte, and either resumes the other's to an uninterrupted
 * run's bits; so does {@link Learner#save}/{@link Learner#resume}. What does not compose yet is refused before any
 * allocation.
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
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
        valFile = TrainerTest.tokenFile(tmp.resolve("val.bin"), 200, new Random(12));
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

    // ---- the trainer ----

    /** The trainer's model as the CLI's {@code RankRun} makes it for --bf16-params (activations as the precision says). */
    private static Gpt2 model(TrainConfig cfg, Parallel pool, Recompute recompute) {
        Precision p = cfg.precision();
        Gpt2 m = new Gpt2(TrainerTest.TINY, new CpuOps(pool), cfg.batch(), cfg.seq(),
                Gpt2Options.DEFAULT.withRecompute(recompute).withPrecision(p.operands(), p.fp8())
                        .withActivationStorage(p.activationStorage()).withGradientStorage(p.gradients())
                        .withParameterStorage(DType.BF16));
        m.initialise(INIT_SEED); // before the trainer: its optimizer's master starts as the store
        return m;
    }

    /** The trainer's rank: {@code resume} (or null), to {@code stop} steps, saving at SAVED_AT into {@code save}. */
    private static String trainerRank(TrainConfig cfg, Recompute recompute, Communicator comm, boolean offload,
                                      Path resume, Path save, int stop) throws IOException {
        try (Parallel pool = new Parallel(1); Gpt2 m = model(cfg, pool, recompute);
             Trainer t = new Trainer(m, cfg, trainFile, null, comm, offload ? Bf16ParamStates.offloaded()
                     : ModelStates::of);
             Arena a = Arena.ofConfined()) {
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
            t.checkReplicas();
            MemorySegment master = a.allocate(m.layout().fp32Bytes(), 64), working = a.allocate(m.layout().fp32Bytes(),
                    64);
            t.copyParameters(master);
            m.copyParamsToHost(working);
            return crc(steps, master, working);
        }
    }

    private static String trainer(TrainConfig cfg, int ranks, boolean offload, Path resume, Path save, int stop)
            throws IOException {
        return trainer(cfg, Recompute.NONE, ranks, offload, resume, save, stop);
    }

    private static String trainer(TrainConfig cfg, Recompute recompute, int ranks, boolean offload, Path resume,
                                  Path save, int stop) throws IOException {
        if (ranks == 1) {
            return trainerRank(cfg, recompute, null, offload, resume, save, stop);
        }
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(60))) {
            List<String> all = g.run(comm -> {
                try {
                    return trainerRank(cfg, recompute, comm, offload, resume, save, stop);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            assertThat(all).as("every rank").containsOnly(all.get(0));
            return all.get(0);
        }
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
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, TrainerTest.TINY, cfg.batch(), cfg.seq(),
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
        "1, bf16, 2, 0.5, FP32, false, 0, NONE",
        "1, fp32, 1, 1, FP32, false, 0, NONE",
        "1, fp16, 2, 0.5, FP32, false, 0, GELU",
        "1, fp16big, 1, 0, FP32, false, 0, NONE",
        "1, bf16, 2, 0.5, BF16, false, 0, LAYER",
        "1, fp16, 1, 1, FP16, false, 0, NONE",
        "1, bf16, 2, 0.5, FP32, true, 0, GELU",
        "1, bf16, 1, 0, BF16, true, 0, NONE",
        "1, fp8, 2, 0.5, FP32, false, 0, NONE",
        "2, bf16, 2, 0.5, FP32, false, 0, NONE",
        "2, bf16, 1, 0.5, FP32, false, 256, LAYER",
        "2, fp16, 2, 1, BF16, false, 0, NONE",
        "2, bf16, 2, 0, FP32, true, 256, NONE",
        "3, bf16, 1, 0.5, FP32, false, 0, GELU",
        "3, fp32, 2, 0, BF16, false, 0, NONE",
        "3, bf16, 2, 0.5, FP32, true, 0, NONE"})
    void theJavaApiTrainsBf16WorkingWeightsAsTheTrainer(int ranks, String p, int K, float clip, DType gradients,
                                                        boolean offload, long buckets, Recompute recompute)
            throws IOException {
        TrainConfig cfg = cfg(p, K, clip, gradients);
        String old = trainer(cfg, recompute, ranks, offload, null, null, cfg.steps());
        assertThat(learner(cfg, recompute, ranks, offload, buckets, null, null, cfg.steps())).isEqualTo(old);
        String[] crcs = old.split(" "); // steps, master, skipped, working
        if (p.equals("fp16big")) { // no update: the master is the initial weights rounded, as the store
            assertThat(crcs[2]).as("every step overflows and is skipped").isEqualTo("8");
            assertThat(crcs[1]).as("the master").isEqualTo(crcs[3]);
        } else {
            assertThat(crcs[1]).as("the master keeps what bf16 rounds away").isNotEqualTo(crcs[3]);
        }
    }

    /**
     * The llm.c checkpoint at step 3 (the fp32 master as the model file, m and v in the state file, the pointer) is the
     * trainer's byte for byte, and each resumes the other's to the uninterrupted run's bits: losses, master and the
     * bf16 weights rounded from the master as update 3 rounded them (fp16big: the store rounded to nearest, no update
     * having been made).
     */
    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, gradients {3}, offload {4}")
    @CsvSource({
        "1, bf16, 2, FP32, false",
        "1, bf16, 1, BF16, true",
        "1, fp16big, 1, FP32, false",
        "2, bf16, 2, FP32, false",
        "2, fp16, 1, BF16, true",
        "3, bf16, 1, FP32, false"})
    void theJavaApiWritesAndResumesTheTrainersCheckpoints(int ranks, String p, int K, DType gradients,
                                                         boolean offload, @TempDir Path dir) throws IOException {
        TrainConfig cfg = cfg(p, K, 0.5f, gradients);
        int steps = cfg.steps();
        Path byTrainer = dir.resolve("trainer"), byLearner = dir.resolve("learner");
        String whole = trainer(cfg, ranks, offload, null, byTrainer, steps);
        assertThat(learner(cfg, ranks, offload, 0, null, byLearner, steps)).as("the Java API's whole run")
                .isEqualTo(whole);
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", Trainer.POINTER}) {
            assertThat(Files.readAllBytes(byLearner.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(byTrainer.resolve(f)));
        }
        String rest = whole.substring(9); // the parameters' CRCs (the steps' differ: the first three are not run)
        assertThat(learner(cfg, ranks, !offload, 0, byTrainer, null, steps).substring(9))
                .as("the Java API from the trainer's checkpoint, offloaded or not the other way").isEqualTo(rest);
        assertThat(trainer(cfg, ranks, offload, byLearner, null, steps).substring(9))
                .as("the trainer from the Java API's checkpoint").isEqualTo(rest);
    }

    /** {@link Learner#save} and {@link Learner#resume}: the master as the model, m and v as the state. */
    @ParameterizedTest(name = "{0} ranks, gradients {1}, offload {2}")
    @CsvSource({"1, FP32, false", "1, BF16, true", "2, FP32, true", "2, BF16, false"})
    void aLearnersOwnCheckpointResumesBitForBit(int ranks, DType gradients, boolean offload, @TempDir Path dir)
            throws IOException {
        TrainConfig cfg = cfg("bf16", 2, 0.5f, gradients);
        String whole = learner(cfg, ranks, offload, 0, null, null, cfg.steps());
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            new LearnerLlmcCheckpoints(l, true, TrainerTest.TINY, cfg.batch(), cfg.seq(), cfg.gradAccum(),
                    data.loaders(), CheckpointFiles.Retention.LATEST).start(null, INIT_SEED);
            l.fit(SAVED_AT, null);
            l.save(dir);
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

    /** The trainer rank's val losses (every VAL_EVERY steps, before the step) and its run's CRCs. */
    private static String validatingRank(TrainConfig cfg, Communicator comm, boolean offload) {
        try (Parallel pool = new Parallel(1); Gpt2 m = model(cfg, pool, Recompute.NONE);
             Trainer t = new Trainer(m, cfg, trainFile, valFile, comm, offload ? Bf16ParamStates.offloaded()
                     : ModelStates::of);
             Arena a = Arena.ofConfined()) {
            List<StepMetrics> steps = new ArrayList<>();
            List<Double> val = new ArrayList<>();
            while (!t.done()) {
                StepMetrics s = t.trainStep();
                steps.add(s);
                if (!Double.isNaN(s.valLoss())) {
                    val.add(s.valLoss());
                }
            }
            MemorySegment master = a.allocate(m.layout().fp32Bytes(), 64), working = a.allocate(m.layout().fp32Bytes(),
                    64);
            t.copyParameters(master);
            m.copyParamsToHost(working);
            return val + " " + crc(steps, master, working);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * The CLI trainer's validation on the Java API ({@link LearnerValidationTest}'s way: {@link Learner#evaluate} over
     * the val file's first batches) over bf16 working weights: the trainer's val losses bit for bit, and training
     * as it was.
     */
    @ParameterizedTest(name = "{0} ranks, K={1}, offload {2}")
    @CsvSource({"1, 2, false", "2, 1, true"})
    void theJavaApiValidatesAsTheTrainer(int ranks, int K, boolean offload) throws IOException {
        TrainConfig cfg = cfg("bf16", K, 0.5f, DType.FP32).toBuilder().valEvery(VAL_EVERY).valBatches(VAL_BATCHES)
                .build();
        String old;
        if (ranks == 1) {
            old = validatingRank(cfg, null, offload);
        } else {
            try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(60))) {
                old = g.run(comm -> validatingRank(cfg, comm, offload)).get(0);
            }
        }
        try (Arena arena = Arena.ofShared();
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            new LearnerLlmcCheckpoints(l, true, TrainerTest.TINY, cfg.batch(), cfg.seq(), cfg.gradAccum(),
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
            assertThat(val + " " + crc(steps, LearnerGpt2Test.parameters(l, arena), working(l, arena)))
                    .isEqualTo(old);
        }
    }

    /** The start-up memory lines' figures: the model's bytes and the model states', as the trainer's. */
    @ParameterizedTest(name = "{0} ranks, gradients {1}, offload {2}")
    @CsvSource({"1, FP32, false", "1, BF16, true", "2, FP32, true", "2, BF16, false"})
    void theMemoryFiguresAreTheTrainers(int ranks, DType gradients, boolean offload) throws IOException {
        TrainConfig cfg = cfg("bf16", 1, 0f, gradients);
        String old;
        if (ranks == 1) {
            old = memoryLine(cfg, null, offload);
        } else {
            try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(60))) {
                old = g.run(comm -> memoryLine(cfg, comm, offload)).get(0);
            }
        }
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, ranks, offload, 0, data).build()) {
            String now = l.zeroMemory().describe(l.modelStateBytes(), l.workingBytes()) + " ["
                    + l.modelStateBytes() + "] model " + l.modelBytes() + ", activations "
                    + l.network().activationBytes();
            assertThat(now).isEqualTo(old);
            assertThat(l.optimizerStateBytes()).as("master, m and v").isEqualTo(12 * l.network().table().count());
        }
    }

    /** The trainer rank's memory line (as {@code RankRun} prints it) and its figures. */
    private static String memoryLine(TrainConfig cfg, Communicator comm, boolean offload) {
        try (Parallel pool = new Parallel(1); Gpt2 m = model(cfg, pool, Recompute.NONE);
             Trainer t = new Trainer(m, cfg, trainFile, null, comm, offload ? Bf16ParamStates.offloaded()
                     : ModelStates::of)) {
            return t.memory().describe(t.modelStateBytes(), t.workingBytes()) + " [" + t.modelStateBytes()
                    + "] model " + m.totalBytes() + ", activations " + m.activationBytes();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
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
                            io.accel4j.nn.Linear.of("fc", TrainerTest.TINY.V(), TrainerTest.TINY.V())))
                    .features(TrainerTest.TINY.V()).classes(TrainerTest.TINY.V()).batch(2, 1)
                    .parameterStorage(DType.BF16).data(data);
            assertThatThrownBy(b::build).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("bf16 parameter storage keeps the parameters of the units a UnitScope");
        }
    }
}
