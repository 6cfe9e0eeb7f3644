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
import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerProbe;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ZeRO stages 1..3 of the CLI's GPT-2 {@link Learner} ({@code fit.ZeroSharding} stage 1, {@code fit.UnitSharding} over
 * {@code fit.ShardedModel} at 2 and 3), each in-process rank a learner over its communicator as {@code accel4j train}'s
 * ranks are, train exactly as plain data parallelism: the same parameters, losses and norms after a few steps, with 2
 * ranks and with 3 (the parameter count not a multiple of 3, shards of unequal length); llm.c's checkpoints
 * ({@link LearnerLlmcCheckpoints}) save and resume across stages; the memory accounting is the ZeRO paper's.
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
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(23));
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

    /** This rank's run from GPT-2's initialisation from seed 1; its parameters null off rank 0 at stages 2 and 3. */
    private static Run train(GptConfig config, Recompute recompute, TrainConfig cfg, Communicator comm) {
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
             Learner l = Gpt2LearnerRuns.builder(config, cfg, comm, recompute, DType.FP32, data).build()) {
            Gpt2LearnerRuns.initialised(l, config, cfg, data, 1);
            assertThat(l.describe()).contains(comm.size() + " ranks" + (cfg.zeroStage() > 0 ? " (ZeRO-"
                    + cfg.zeroStage() + ")" : ","));
            // from stage 2 the network's whole buffers are gone: the units' shards hold the parameters
            assertThat(l.network().flat()).as("whole parameter and gradient buffers").isEqualTo(cfg.zeroStage() < 2);
            List<StepMetrics> steps = l.fit(cfg.steps(), null);
            return new Run(Gpt2LearnerRuns.rankParameters(l, comm.rank()), Gpt2LearnerRuns.losses(steps),
                    Gpt2LearnerRuns.norms(steps), LearnerProbe.buckets(l));
        }
    }

    /** Rank 0's run, after checking every rank ended with the very same bits. */
    private static Run ranks(int n, TrainConfig cfg) {
        return ranks(n, Gpt2Fixtures.TINY, Recompute.NONE, cfg);
    }

    private static Run ranks(int n, GptConfig config, Recompute recompute, TrainConfig cfg) {
        List<Run> runs;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            runs = g.run(comm -> train(config, recompute, cfg, comm));
        }
        for (int r = 1; r < n; r++) {
            if (runs.get(r).params() != null) { // stages 2 and 3 gather the whole parameters to rank 0 only
                assertThat(runs.get(r).params()).as("rank %d's parameters vs rank 0's", r)
                        .containsExactly(runs.get(0).params());
            }
            assertThat(runs.get(r).losses()).containsExactly(runs.get(0).losses());
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
        try (Parallel pool = new Parallel(1); Gpt2 init = Gpt2Fixtures.model(new CpuOps(pool), 2, 1)) {
            assertThat(maxDiff(zero.params(), Gpt2Fixtures.floats(init.params()))).isGreaterThan(1e-3);
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

    /**
     * ZeRO-3's evaluation gathers each unit's parameters in its forward, a collective: every rank evaluates, and rank
     * 0's validation losses are plain DDP's (evaluated on rank 0 alone) bit for bit: before steps 0 and 2 and after the
     * last, as {@code accel4j train --val-every 2} validates.
     */
    @Test
    void stageThreeValidatesOnEveryRankAsDdpDoesOnRankZero() {
        TrainConfig.Builder b = cfg(0, 0, 0).steps(3);
        double[] ddp = validate(b.build()), zero = validate(b.zeroStage(3).build());
        assertThat(zero).as("rank 0's validation losses").containsExactly(ddp);
        assertThat(zero[0]).isFinite();
        assertThat(zero[2]).as("the steps moved the loss").isNotEqualTo(zero[0]);
    }

    /** Rank 0's validation losses (2 batches of the train file from its start) before steps 0 and 2, and after the last. */
    private static double[] validate(TrainConfig cfg) {
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            return g.run(comm -> {
                boolean every = cfg.zeroStage() == 3 || comm.rank() == 0;
                try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
                     Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, data).build();
                     DataLoader val = new DataLoader(trainFile, cfg.batch(), cfg.seq(), 0, 1,
                             SampleOrder.Mode.SEQUENTIAL, 0)) {
                    Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, cfg, data, 1);
                    DataLoader.State start = val.position();
                    double[] v = new double[3];
                    for (int i = 0; i < 3; i++) {
                        if (every) {
                            val.seek(start);
                            v[i] = l.evaluate(val::next, 2);
                        }
                        if (i < 2) {
                            l.fit(2 - i, null); // steps 0 and 1, then step 2, the last
                        }
                    }
                    return v;
                }
            }).get(0);
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
                .isEqualTo(STEPS * Gpt2Fixtures.TINY.L()).isEqualTo(ddp.layerBuckets());
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
                try (TokenSource data = Gpt2LearnerRuns.source(trainFile, saving);
                     Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, saving, comm, data).build()) {
                    Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, saving, data, 1);
                    l.fit(3, null);
                    // every rank takes part (ZeRO's shards are gathered); rank 0 writes
                    Gpt2LearnerRuns.checkpoints(l, comm.rank() == 0, Gpt2Fixtures.TINY, saving, data).save(dir);
                    l.fit(1, null); // a step the resumed run must not see
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                return null;
            });
        }
        try (var files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList())
                    .containsExactly(CheckpointFiles.POINTER, "model_00000003.bin", "state_00000003.bin");
        }
        List<Run> resumed;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            resumed = g.run(comm -> {
                try (TokenSource data = Gpt2LearnerRuns.source(trainFile, resuming);
                     Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, resuming, comm, data).build()) {
                    Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, resuming, data, 99); // other init: overwritten
                    Gpt2LearnerRuns.checkpoints(l, comm.rank() == 0, Gpt2Fixtures.TINY, resuming, data).resume(dir);
                    assertThat(l.step()).isEqualTo(3);
                    List<StepMetrics> steps = l.fit(resuming.steps() - l.step(), null);
                    return new Run(Gpt2LearnerRuns.rankParameters(l, comm.rank()), Gpt2LearnerRuns.losses(steps),
                            new double[0], 0);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        }
        for (Run r : resumed) {
            assertThat(r.losses()).as("the resumed steps' losses")
                    .containsExactly(java.util.Arrays.copyOfRange(straight.losses(), 3, 6));
            if (r.params() != null) {
                assertThat(r.params()).containsExactly(straight.params());
            }
        }
    }

    @Test
    void theLearnersShardsAreTheAccountedOnes() {
        long count = Gpt2Fixtures.TINY.parameterCount();
        assertThat(count % 3).as("an uneven split").isNotZero();
        for (int stage = 0; stage <= 3; stage++) {
            int s = stage;
            List<ZeroMemory> seen;
            try (InProcessGroup g = InProcessGroup.create(3, Duration.ofSeconds(30))) {
                seen = g.run(comm -> {
                    TrainConfig cfg = cfg(s, 0, 0).build();
                    try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
                         Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, data).build()) {
                        return l.zeroMemory();
                    }
                });
            }
            for (ZeroMemory z : seen) {
                assertThat(z).isEqualTo(ZeroMemory.fp32(stage, 3, count));
                assertThat(z.shard()).isEqualTo(Math.max(Chunks.length(count, 3, 0), Chunks.length(count, 3, 2)));
            }
        }
    }

    /**
     * A bad stage is refused by the config and by the learner. (The trainer also refused ZeRO over one rank; a
     * {@code Learner} of one rank runs any stage as plain training, and the CLI asks for none: {@code LearnerRun}.)
     */
    @Test
    void aBadStageIsRefused() {
        assertThatThrownBy(() -> cfg(4, 0, 0).build()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("zeroStage must be 0 (plain data parallelism), 1, 2 or 3, got 4");
        assertThatThrownBy(() -> cfg(-1, 0, 0).build()).hasMessageContaining("got -1");
        assertThatThrownBy(() -> Learner.of(() -> io.accel4j.nn.Gpt2Blocks.body(Gpt2Fixtures.TINY)).zero(4))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("ZeRO stage must be 0, 1, 2 or 3, got 4");
    }
}
