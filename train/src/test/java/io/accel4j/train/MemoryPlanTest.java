package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** {@link MemoryPlan} against what a model and trainer really allocate, and {@link BatchSizeFinder}'s choices. */
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

    @ParameterizedTest
    @EnumSource(Recompute.class)
    void thePlanIsWhatAModelAndItsTrainerAllocate(Recompute recompute) throws IOException {
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
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = new Gpt2(CONFIG, ops, B, T, recompute);
             Trainer trainer = new Trainer(model, cfg, train, null)) {
            assertThat(model.totalBytes() + trainer.stateBytes()).isEqualTo(plan.total());
        }
        assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, recompute)).isEqualTo(plan.total());
    }

    @Test
    void zeroShardsTheOptimizerThenTheGradientsThenTheParameters() {
        int B = 2, ranks = 3;
        long psi = new ParameterLayout(CONFIG).count(), shard = (psi + ranks - 1) / ranks;
        MemoryPlan[] p = new MemoryPlan[4];
        for (int stage = 0; stage <= 3; stage++) {
            p[stage] = MemoryPlan.of(CONFIG, B, T, Recompute.NONE, stage, ranks);
            assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, Recompute.NONE, stage, ranks))
                    .as("trial at stage %d", stage).isEqualTo(p[stage].total());
        }
        assertThat(p[0]).isEqualTo(MemoryPlan.of(CONFIG, B, T, Recompute.NONE));
        assertThat(p[1].optimizer()).isEqualTo(8 * shard);
        assertThat(p[2].gradients()).isEqualTo(4 * psi + 4 * shard);
        assertThat(p[3].parameters()).isEqualTo(4 * psi + 4 * shard);
        assertThat(p[3].total() - p[0].total()).isEqualTo(8 * shard + 8 * shard - 8 * psi);
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
