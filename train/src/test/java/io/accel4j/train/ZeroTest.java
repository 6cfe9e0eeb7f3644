package io.accel4j.train;

import io.accel4j.train.parallel.ZeroMemory;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ZeRO stages 1..3 over in-process ranks train exactly as plain data parallelism: the same parameters, losses and
 * norms after a few steps, with 2 ranks and with 3 (the parameter count not a multiple of 3, shards of unequal
 * length); checkpoints save and resume across stages; the memory accounting is the ZeRO paper's.
 */
class ZeroTest {

    private static final int STEPS = 4;
    private static final float CLIP = 0.5f;
    /**
     * Gradient norms of stage 2/3 vs DDP, relative: the same squares summed in another grouping (per shard, fp32
     * lanes over runs of ≤ 35 squares, then float64): within the kernel's bound 35·2⁻²⁴ = 2.1e-6 of the exact sum
     * each, so 5e-6 for the two; in practice ~1e-8.
     */
    private static final double NORM_REL = 5e-6;
    /**
     * Parameters of stage 2/3 vs DDP with clipping active: the only difference is the clip factor, which may differ by
     * about the norm's relative error (≤ 5e-6, in practice an ulp or none) and scales a whole gradient uniformly.
     * AdamW's m̂/(√v̂ + ε) is invariant to that scale up to ε, so an update moves by at most lr·5e-6 = 5e-8 per step:
     * 2e-7 over {@link #STEPS} steps, 1e-6 leaving margin for the forward's feedback; a real bug (a wrong shard, a
     * missing gather) moves parameters by ~lr = 1e-2.
     */
    private static final double CLIPPED_PARAM_TOL = 1e-6;
    /**
     * Parameters of stage 2/3 vs DDP over 3 ranks (or with several micro-batches), unclipped: the per-unit
     * reduce-scatter adds an element's N terms starting at another rank than the whole-buffer all-reduce (the ring
     * starts each chunk at the rank after its owner, and a unit's chunks are not the vector's; with K micro-batches
     * a layer's gradient is Σ_k avg_r instead of avg_r Σ_k), so a gradient differs by a rounding,
     * ~2⁻²³ of its terms' magnitude; AdamW's step, ≤ lr·|m̂/(√v̂ + ε)|, then moves by about lr·2⁻²³ ≈ 1e-9 per step
     * where the terms do not cancel. 1e-6 leaves room for elements whose terms cancel and for the forward's feedback;
     * a real bug moves parameters by ~lr = 1e-2.
     */
    private static final double ORDER_PARAM_TOL = 1e-6;
    /** Train losses of such a run vs DDP, relative: the parameters above move a loss by far less than 1e-6 of it. */
    private static final double ORDER_LOSS_REL = 1e-6;

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 400, new Random(23));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /** Weight decay on the matrices only, so AdamW's runs are cut by the shards' boundaries. */
    private static TrainConfig.Builder cfg(int stage, float clip, long bucketBytes) {
        return TrainConfig.builder().batch(2).seq(5).steps(STEPS).lr(1e-2f).eps(1e-5f).gradClip(clip)
                .weightDecay(0.1f).decayMatricesOnly(true).dataOrder(SampleOrder.Mode.SEQUENTIAL)
                .bucketBytes(bucketBytes).zeroStage(stage);
    }

    private record Run(float[] params, double[] losses, double[] norms, int layerBuckets) {}

    private static Run train(GptConfig config, Recompute recompute, TrainConfig cfg, Communicator comm)
            throws IOException {
        try (Parallel pool = new Parallel(1);
             Gpt2 m = new Gpt2(config, new CpuOps(pool), cfg.batch(), config.maxT(), Gpt2Options.DEFAULT
                     .withRecompute(recompute))) {
            m.initialise(1);
            try (Trainer t = new Trainer(m, cfg, trainFile, null, comm)) {
                assertThat(t.zeroStage()).isEqualTo(cfg.zeroStage());
                if (cfg.zeroStage() >= 2) { // the model's whole buffers are gone
                    assertThatThrownBy(m::grads).isInstanceOf(IllegalStateException.class);
                }
                if (cfg.zeroStage() == 3) {
                    assertThatThrownBy(m::params).hasMessageContaining("sharded over the ranks");
                }
                double[] losses = new double[cfg.steps()], norms = new double[cfg.steps()];
                for (int s = 0; s < cfg.steps(); s++) {
                    StepMetrics sm = t.trainStep();
                    losses[s] = sm.trainLoss();
                    norms[s] = sm.gradNorm();
                }
                t.checkReplicas();
                return new Run(parameters(t), losses, norms, t.layerBuckets());
            }
        }
    }

    /** The trainer's whole parameter vector (at stage 3 a collective: every rank calls it). */
    static float[] parameters(Trainer t) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment full = a.allocate(t.model().layout().fp32Bytes());
            t.copyParameters(full);
            return TrainerTest.floats(full);
        }
    }

    /** Rank 0's run, after checking every rank ended with the very same bits. */
    private static Run ranks(int n, TrainConfig cfg) {
        return ranks(n, TrainerTest.TINY, Recompute.NONE, cfg);
    }

    private static Run ranks(int n, GptConfig config, Recompute recompute, TrainConfig cfg) {
        List<Run> runs;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            runs = g.run(comm -> train(config, recompute, cfg, comm));
        }
        for (int r = 1; r < n; r++) {
            assertThat(runs.get(r).params()).as("rank %d's parameters vs rank 0's", r)
                    .containsExactly(runs.get(0).params());
            assertThat(runs.get(r).norms()).containsExactly(runs.get(0).norms());
        }
        return runs.get(0);
    }

    /** Plain DDP's runs by (ranks, clip): each is the reference of three stages. */
    private static final java.util.Map<String, Run> DDP = new java.util.concurrent.ConcurrentHashMap<>();

    @ParameterizedTest(name = "ZeRO-{1} over {0} ranks, clip {2}")
    @CsvSource({"2, 1, 0", "2, 2, 0", "2, 3, 0", "3, 1, 0", "3, 2, 0", "3, 3, 0",
        "2, 1, 0.5", "2, 2, 0.5", "2, 3, 0.5", "3, 1, 0.5", "3, 2, 0.5", "3, 3, 0.5"})
    void everyStageTrainsAsPlainDataParallelism(int n, int stage, float clip) {
        // one all-reduce of the whole buffer: the reduce-scatter's summation order
        Run ddp = DDP.computeIfAbsent(n + "/" + clip, k -> ranks(n, cfg(0, clip, 0).build()));
        Run zero = ranks(n, cfg(stage, clip, 0).build());
        // from stage 2 the norm, hence the clip factor, may differ, and over 3 ranks the gradients are summed in
        // another order
        boolean sameOrder = stage < 2 || n == 2;
        boolean exact = stage == 1 || clip == 0 && sameOrder;
        if (sameOrder) {
            assertThat(zero.losses()).as("train losses").containsExactly(ddp.losses());
        } else {
            assertClose(zero.losses(), ddp.losses());
        }
        if (clip > 0) {
            assertThat(java.util.Arrays.stream(ddp.norms()).max().orElseThrow()).as("clipping is active")
                    .isGreaterThan(CLIP);
        }
        for (int s = 0; s < STEPS; s++) {
            if (stage == 1) {
                assertThat(zero.norms()[s]).as("norm of step %d", s).isEqualTo(ddp.norms()[s]);
            } else {
                assertThat(zero.norms()[s]).as("norm of step %d", s)
                        .isCloseTo(ddp.norms()[s], offset(NORM_REL * ddp.norms()[s]));
            }
        }
        if (exact) {
            assertThat(zero.params()).as("parameters").containsExactly(ddp.params());
        } else {
            double worst = maxDiff(zero.params(), ddp.params());
            System.out.printf("ZeRO-%d over %d ranks, clip %s: largest |parameter difference| to DDP %.3g%n",
                    stage, n, clip, worst);
            assertThat(worst).as("largest |parameter difference|")
                    .isLessThanOrEqualTo(clip > 0 ? CLIPPED_PARAM_TOL : ORDER_PARAM_TOL);
        }
        // the comparison is not vacuous: the steps moved the parameters far more than any tolerance
        try (Parallel pool = new Parallel(1); Gpt2 init = TrainerTest.model(new CpuOps(pool), 2, 1)) {
            assertThat(maxDiff(zero.params(), TrainerTest.floats(init.params()))).isGreaterThan(1e-3);
        }
    }

    /**
     * One layer (its buffers shared by every layer; stage 2's scratch chunk for later micro-batches), three, and
     * backward recomputing a layer from its gathered weights; five with every:K, backward running a segment's forward
     * again (gathering its layers once more).
     */
    @ParameterizedTest(name = "ZeRO-{2} with L = {0}, recompute {1}, {3} micro-batches")
    @CsvSource({"1, NONE, 3, 1", "3, LAYER, 3, 1", "3, GELU, 3, 1", "1, NONE, 2, 2", "1, NONE, 3, 2",
        "5, every:2, 3, 1", "5, every:3, 2, 2"})
    void theShardedStagesUseEveryUnitWhereTheModelDoes(int L, Recompute recompute, int stage, int K) {
        GptConfig c = new GptConfig(8, 11, 16, L, 2, 8);
        Run ddp = ranks(2, c, Recompute.NONE, cfg(0, 0, 0).gradAccum(K).build());
        Run zero = ranks(2, c, recompute, cfg(stage, 0, 0).gradAccum(K).build());
        if (K == 1) {
            assertThat(zero.losses()).containsExactly(ddp.losses());
            assertThat(zero.params()).containsExactly(ddp.params());
        } else {
            assertClose(zero.losses(), ddp.losses());
            assertThat(maxDiff(zero.params(), ddp.params())).isLessThanOrEqualTo(ORDER_PARAM_TOL);
        }
    }

    @Test
    void stageThreeValidatesOnEveryRankAsDdpDoesOnRankZero() throws IOException {
        TrainConfig.Builder b = cfg(0, 0, 0).steps(3).valEvery(2).valBatches(2);
        List<double[]> ddp = validate(b.build()), zero = validate(b.zeroStage(3).build());
        assertThat(zero.get(0)).as("rank 0's validation losses").containsExactly(ddp.get(0));
        assertThat(zero.get(0)[0]).isFinite();
        assertThat(zero.get(1)).as("rank 1 reports none").containsOnly(Double.NaN);
    }

    /** Each rank's validation losses before steps 0 and 2, and after the last. */
    private static List<double[]> validate(TrainConfig cfg) {
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            return g.run(comm -> {
                try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 1);
                     Trainer t = new Trainer(m, cfg, trainFile, trainFile, comm)) {
                    double first = t.trainStep().valLoss();
                    t.trainStep();
                    double third = t.trainStep().valLoss();
                    double last = cfg.zeroStage() == 3 || comm.rank() == 0 ? t.validate() : Double.NaN;
                    return new double[] {first, third, comm.rank() == 0 ? last : Double.NaN};
                }
            });
        }
    }

    private static void assertClose(double[] losses, double[] ddp) {
        for (int s = 0; s < ddp.length; s++) {
            assertThat(losses[s]).as("train loss of step %d", s).isCloseTo(ddp[s], offset(ORDER_LOSS_REL * ddp[s]));
        }
    }

    @ParameterizedTest(name = "ZeRO-{1} over {0} ranks, 3 micro-batches")
    @CsvSource({"2, 2", "2, 3", "3, 3"})
    void accumulatedMicroBatchesTrainAsPlainDataParallelism(int n, int stage) {
        Run ddp = ranks(n, cfg(0, 0, 0).gradAccum(3).build());
        Run zero = ranks(n, cfg(stage, 0, 0).gradAccum(3).build());
        // stages 2 and 3 reduce-scatter every micro-batch: Σ_k avg_r instead of avg_r Σ_k
        assertClose(zero.losses(), ddp.losses());
        double worst = maxDiff(zero.params(), ddp.params());
        System.out.printf("ZeRO-%d over %d ranks, 3 micro-batches: largest |parameter difference| to DDP %.3g%n",
                stage, n, worst);
        assertThat(worst).isLessThanOrEqualTo(ORDER_PARAM_TOL);
        assertThat(maxDiff(zero.params(), ranks(n, cfg(0, 0, 0).build()).params())).as("vs one micro-batch")
                .isGreaterThan(1e-3);
    }

    private static double maxDiff(float[] a, float[] b) {
        double worst = 0;
        for (int i = 0; i < a.length; i++) {
            worst = Math.max(worst, Math.abs(a[i] - b[i]));
        }
        return worst;
    }

    @Test
    void stageOneKeepsTheBucketedOverlapAndStageTwoReduceScatters() {
        long perLayer = 1;
        Run ddp = ranks(3, cfg(0, CLIP, perLayer).build());
        Run one = ranks(3, cfg(1, CLIP, perLayer).build());
        assertThat(one.layerBuckets()).as("buckets started during backward")
                .isEqualTo(STEPS * TrainerTest.TINY.L()).isEqualTo(ddp.layerBuckets());
        assertThat(one.params()).containsExactly(ddp.params());
        assertThat(one.norms()).containsExactly(ddp.norms());
        Run two = ranks(3, cfg(2, 0, perLayer).build());
        assertThat(two.layerBuckets()).as("no all-reduce buckets: a reduce-scatter per unit").isZero();
    }

    /** Over 3 ranks stages 2 and 3 sum in another order than 0 and 1 (see above): across them, 2 ranks. */
    @ParameterizedTest(name = "save at ZeRO-{0}, resume at ZeRO-{1}, {2} ranks")
    @CsvSource({"1, 1, 3", "2, 2, 3", "3, 3, 3", "2, 3, 3", "3, 0, 2", "0, 3, 2", "0, 2, 2", "1, 2, 2"})
    void checkpointsResumeBitForBitAcrossStages(int saveStage, int resumeStage, int n) throws IOException {
        Path dir = tmp.resolve("ckpt-" + saveStage + "-" + resumeStage);
        TrainConfig saving = cfg(saveStage, 0, 0).steps(6).build(), resuming = cfg(resumeStage, 0, 0).steps(6).build();
        Run straight = ranks(n, resuming);
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            g.run(comm -> {
                try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 1);
                     Trainer t = new Trainer(m, saving, trainFile, null, comm)) {
                    for (int s = 0; s < 3; s++) {
                        t.trainStep();
                    }
                    if (saveStage > 0 || comm.rank() == 0) { // with ZeRO every rank takes part; rank 0 writes
                        t.save(dir);
                    }
                    t.trainStep(); // a step the resumed run must not see
                }
                return null;
            });
        }
        try (var files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList())
                    .containsExactly(Trainer.POINTER, "model_00000003.bin", "state_00000003.bin");
        }
        List<Run> resumed;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            resumed = g.run(comm -> {
                try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 99);
                     Trainer t = new Trainer(m, resuming, trainFile, null, comm)) { // other init: overwritten
                    t.resume(dir);
                    assertThat(t.step()).isEqualTo(3);
                    List<Double> losses = new ArrayList<>();
                    while (!t.done()) {
                        losses.add(t.trainStep().trainLoss());
                    }
                    return new Run(parameters(t),
                            losses.stream().mapToDouble(Double::doubleValue).toArray(), new double[0], 0);
                }
            });
        }
        for (Run r : resumed) {
            assertThat(r.losses()).as("the resumed steps' losses")
                    .containsExactly(java.util.Arrays.copyOfRange(straight.losses(), 3, 6));
            assertThat(r.params()).containsExactly(straight.params());
        }
    }

    @Test
    void theTrainersShardsAreTheAccountedOnes() {
        long count = TrainerTest.TINY.parameterCount();
        assertThat(count % 3).as("an uneven split").isNotZero();
        for (int stage = 0; stage <= 3; stage++) {
            int s = stage;
            List<ZeroMemory> seen;
            try (InProcessGroup g = InProcessGroup.create(3, Duration.ofSeconds(30))) {
                seen = g.run(comm -> {
                    try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 1);
                         Trainer t = new Trainer(m, cfg(s, 0, 0).build(), trainFile, null, comm)) {
                        return t.memory();
                    }
                });
            }
            for (ZeroMemory z : seen) {
                assertThat(z).isEqualTo(ZeroMemory.fp32(stage, 3, count));
                assertThat(z.shard()).isEqualTo(Math.max(Chunks.length(count, 3, 0), Chunks.length(count, 3, 2)));
            }
        }
    }

    @Test
    void zeroWithoutRanksOrWithABadStageIsRefused() {
        assertThatThrownBy(() -> cfg(4, 0, 0).build()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("zeroStage must be 0 (plain data parallelism), 1, 2 or 3, got 4");
        assertThatThrownBy(() -> cfg(-1, 0, 0).build()).hasMessageContaining("got -1");
        try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 1)) {
            assertThatThrownBy(() -> new Trainer(m, cfg(2, 0, 0).build(), trainFile, null))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("ZeRO stage 2 shards over the ranks: it needs a communicator of more than "
                            + "one rank (got 1)");
        }
    }
}
