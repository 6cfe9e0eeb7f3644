package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.train.CountingMemory;
import io.accel4j.train.Gpt2LearnerRuns;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.parallel.ZeroMemory;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link MemoryPlan} against what the CLI's GPT-2 {@link Learner} really allocates (its own count and the backend's
 * allocator's), and {@link BatchSizeFinder}'s choices.
 */
class MemoryPlanTest {

    /** Odd sizes throughout: V = 11 padded to 16, C = 8, 3 layers. */
    private static final GptConfig CONFIG = new GptConfig(12, 11, 16, 3, 2, 8);
    private static final int T = 7;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    /** Every mode, and segments of 2 layers (CONFIG has 3: one segment of 2, one of 1). */
    static Recompute[] modes() {
        return new Recompute[] {Recompute.NONE, Recompute.GELU, Recompute.LAYER, Recompute.every(2)};
    }

    @ParameterizedTest
    @MethodSource("modes")
    void thePlanIsWhatALearnerAllocates(Recompute recompute) throws IOException {
        int B = 5;
        MemoryPlan plan = MemoryPlan.of(CONFIG, B, T, recompute);
        long psi = new ParameterLayout(CONFIG).count();
        assertThat(plan.parameters()).isEqualTo(4 * psi);
        assertThat(plan.gradients()).isEqualTo(4 * psi);
        assertThat(plan.optimizer()).isEqualTo(8 * psi);
        assertThat(plan.batch()).isEqualTo(2L * B * T * Integer.BYTES + Float.BYTES);
        Random r = new Random(3);
        int[] tokens = new int[200];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(CONFIG.V());
        }
        TokenFile.write(tmp.resolve("t.bin"), tokens);
        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(1).lr(1e-3f)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
        CountingMemory counted = new CountingMemory();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin")); TokenSource data = Gpt2LearnerRuns.source(train, cfg);
             Learner l = Gpt2LearnerRuns.builder(CONFIG, cfg, 1, recompute, DType.FP32, data)
                     .backend(rank -> counted.ops(ops)).build()) {
            // the batch's buffers are the rank's host arena (RankStep's), the rest the backend's memory
            long want = plan.total() - plan.batch();
            assertThat(l.modelBytes() + l.optimizerStateBytes()).as("the learner's own count").isEqualTo(want);
            assertThat(counted.live.get()).as("allocated").isEqualTo(want);
            assertThat(l.fit(1, null).get(0).trainLoss()).isFinite(); // and it trains in that memory
            assertThat(counted.peak.get()).as("peak").isEqualTo(want);
        }
        assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, recompute)).isEqualTo(plan.total());
    }

    @Test
    void zeroShardsTheOptimizerThenTheGradientsThenTheParameters() {
        int B = 2, ranks = 3, C = CONFIG.C(), L = CONFIG.L();
        long psi = new ParameterLayout(CONFIG).count(), shard = (psi + ranks - 1) / ranks;
        // the working buffers' units, from the shapes: wte + wpe, a layer (12C² + 13C), lnfw + lnfb
        long embeddings = (long) CONFIG.Vp() * C + (long) CONFIG.maxT() * C, layer = 12L * C * C + 13L * C;
        long working = embeddings + 2 * layer + 2L * C;
        MemoryPlan[] p = new MemoryPlan[4];
        for (int stage = 0; stage <= 3; stage++) {
            p[stage] = MemoryPlan.of(CONFIG, B, T, Recompute.NONE, stage, ranks);
            assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, Recompute.NONE, stage, ranks))
                    .as("trial at stage %d", stage).isEqualTo(p[stage].total());
            // the paper's model states (4Ψ + 4Ψ + 8Ψ sharded by stage), up to each of the L + 2 units' chunks
            // rounding up separately from stage 2: ≤ L + 1 more elements than ⌈Ψ/N⌉ per sharded state
            long paper = ZeroMemory.fp32(stage, ranks, psi).totalBytes();
            assertThat(p[stage].modelStates() - paper).as("stage %d's rounding", stage)
                    .isBetween(0L, stage < 2 ? 0L : 16L * (L + 1));
        }
        assertThat(p[0]).isEqualTo(MemoryPlan.of(CONFIG, B, T, Recompute.NONE));
        assertThat(p[0].working()).isZero();
        assertThat(p[1].optimizer()).isEqualTo(8 * shard);
        assertThat(p[1].working()).isZero();
        assertThat(p[2].parameters()).isEqualTo(4 * psi);
        assertThat(p[2].gradients()).isEqualTo(p[3].gradients()).isEqualTo(p[3].parameters())
                .isBetween(4 * shard, 4 * (shard + L + 1));
        // stage 2: gradients of the units in use (with one layer also a layer's chunk: see below)
        assertThat(p[2].working()).isEqualTo(4 * working);
        // stage 3: as many again for the gathered parameters
        assertThat(p[3].working()).isEqualTo(8 * working);
    }

    @Test
    void withOneLayerZeroTwoKeepsAScratchChunk() {
        GptConfig one = new GptConfig(12, 11, 16, 1, 2, 8);
        int C = one.C(), ranks = 3;
        long layer = 12L * C * C + 13L * C, working = (long) one.Vp() * C + (long) one.maxT() * C + layer + 2L * C;
        assertThat(MemoryPlan.of(one, 2, T, Recompute.NONE, 2, ranks).working())
                .isEqualTo(4 * working + 4 * ((layer + ranks - 1) / ranks));
        assertThat(MemoryPlan.of(one, 2, T, Recompute.NONE, 3, ranks).working()).isEqualTo(8 * working);
    }

    @ParameterizedTest(name = "ZeRO-{0} over 3 ranks, L = {1}")
    @CsvSource({"0, 3", "1, 3", "2, 3", "3, 3", "2, 1", "3, 1"})
    void theZeroPlanIsWhatTheLargestRankAllocates(int stage, int L) throws IOException {
        int B = 2, ranks = 3;
        GptConfig config = new GptConfig(CONFIG.maxT(), CONFIG.V(), CONFIG.Vp(), L, CONFIG.NH(), CONFIG.C());
        MemoryPlan plan = MemoryPlan.of(config, B, T, Recompute.NONE, stage, ranks);
        Path file = tmp.resolve("zero" + stage + "-" + L + ".bin");
        Random r = new Random(5);
        int[] tokens = new int[300];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(CONFIG.V());
        }
        TokenFile.write(file, tokens);
        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(2).lr(1e-3f).bucketBytes(0)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).zeroStage(stage).build();
        List<long[]> seen;
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(30))) {
            seen = g.run(comm -> {
                CountingMemory counted = new CountingMemory();
                try (Parallel one = new Parallel(1); TokenFile train = TokenFile.open(file);
                     TokenSource data = Gpt2LearnerRuns.source(train, cfg);
                     Learner l = Gpt2LearnerRuns.builder(config, cfg, comm, data)
                             .backend(rank -> counted.ops(new CpuOps(one))).build()) {
                    long live = counted.live.get();
                    l.fit(1, null); // nothing is allocated per step
                    return new long[] {l.modelBytes() + l.optimizerStateBytes(), l.workingBytes(),
                        l.modelStateBytes(), live, counted.peak.get()};
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
        }
        long most = seen.stream().mapToLong(a -> a[0]).max().orElseThrow();
        long mostCounted = seen.stream().mapToLong(a -> a[3]).max().orElseThrow();
        // not planned: fit.DataParallel's ValueExchange (the norm's partial sums), 2 floats a rank
        long exchange = ranks * 2L * Float.BYTES;
        // the batch's buffers are the rank's host arena (RankStep's), the rest the backend's memory
        assertThat(most).as("the largest rank's own count").isEqualTo(plan.total() - plan.batch());
        assertThat(mostCounted).as("the largest rank's allocations").isEqualTo(plan.total() - plan.batch() + exchange);
        assertThat(seen.stream().mapToLong(a -> a[4]).max().orElseThrow()).as("the largest peak over a step")
                .isEqualTo(plan.total() - plan.batch() + exchange);
        for (long[] a : seen) {
            assertThat(a[1]).as("working buffers").isEqualTo(plan.working());
            assertThat(a[2]).as("model states").isLessThanOrEqualTo(plan.modelStates() + plan.working());
        }
    }

    @Test
    void theLargestBatchIsTheLastThatFits() {
        for (int b : new int[] {1, 2, 9, 33}) {
            long exact = MemoryPlan.of(CONFIG, b, T, Recompute.NONE).total();
            assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, exact, 1000)).isEqualTo(b);
            assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, exact - 1, 1000)).isEqualTo(b - 1);
        }
        assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, Long.MAX_VALUE, 77)).isEqualTo(77);
        // recomputation makes room for more sequences in the same budget
        long budget = MemoryPlan.of(CONFIG, 40, T, Recompute.NONE).total();
        assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.LAYER, budget, 1000)).isGreaterThan(40);
    }

    @Test
    void aGlobalBatchIsSplitIntoTheFewestMicroBatchesThatFit() {
        long fits4 = MemoryPlan.of(CONFIG, 4, T, Recompute.NONE).total();
        BatchSizeFinder.Choice c = BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, fits4, 1, null, 3);
        assertThat(c).extracting(BatchSizeFinder.Choice::batch, BatchSizeFinder.Choice::gradAccum,
                BatchSizeFinder.Choice::largest).containsExactly(4, 3, 4);
        // 12 sequences on 2 ranks: 6 each, at most 4 at a time: 2 micro-batches of 3
        c = BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, fits4, 2, 12, 1);
        assertThat(c).extracting(BatchSizeFinder.Choice::batch, BatchSizeFinder.Choice::gradAccum)
                .containsExactly(3, 2);
        assertThat(c.plan()).isEqualTo(MemoryPlan.of(CONFIG, 3, T, Recompute.NONE));
        // 7 (prime) sequences, 4 at a time: only 7 micro-batches of 1 split it exactly
        c = BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, fits4, 1, 7, 1);
        assertThat(c).extracting(BatchSizeFinder.Choice::batch, BatchSizeFinder.Choice::gradAccum)
                .containsExactly(1, 7);
        // fits in one micro-batch
        c = BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, fits4, 1, 4, 1);
        assertThat(c).extracting(BatchSizeFinder.Choice::batch, BatchSizeFinder.Choice::gradAccum)
                .containsExactly(4, 1);
    }

    @Test
    void impossibleRequestsNameTheProblem() {
        long one = MemoryPlan.of(CONFIG, 1, T, Recompute.NONE).total();
        assertThatThrownBy(() -> BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, one - 1, 1, null, 1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not even one sequence of 7 tokens fits").hasMessageContaining("" + one);
        assertThatThrownBy(() -> BatchSizeFinder.choose(CONFIG, T, Recompute.NONE, one * 4, 2, 5, 1))
                .hasMessageContaining("multiple of the 2 ranks, got 5");
        assertThatThrownBy(() -> MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, one, 0))
                .hasMessageContaining("maxBatch must be >= 1");
    }
}
