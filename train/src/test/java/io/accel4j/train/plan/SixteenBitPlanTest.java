package io.accel4j.train.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.train.CountingMemory;
import io.accel4j.train.Gpt2LearnerRuns;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The memory plan of 16-bit activation storage ({@code --precision bf16|fp16}) is what a model and its trainer
 * allocate, for every recompute mode; and it lets a larger batch fit a budget than fp32 storage.
 */
class SixteenBitPlanTest {

    private static final GptConfig CONFIG = new GptConfig(12, 11, 16, 3, 2, 8);
    private static final int T = 7;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
        Random r = new Random(3);
        int[] tokens = new int[200];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(CONFIG.V());
        }
        TokenFile.write(tmp.resolve("t.bin"), tokens);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (DType d : new DType[] {DType.BF16, DType.FP16}) {
            for (Recompute r : MemoryPlanTest.modes()) {
                a.add(Arguments.of(d, r));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} storage, recompute {1}")
    @MethodSource("cases")
    void thePlanIsWhatALearnerAllocates(DType storage, Recompute recompute) throws IOException {
        int B = 5;
        Precision precision = Precision.of(storage);
        assertThat(precision.activationStorage()).isEqualTo(storage);
        MemoryPlan plan = MemoryPlan.of(CONFIG, B, T, recompute, 0, 1, storage);
        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(1).lr(1e-3f).precision(precision)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
        CountingMemory counted = new CountingMemory();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin")); TokenSource data = Gpt2LearnerRuns.source(train, cfg);
             Learner l = Gpt2LearnerRuns.builder(CONFIG, cfg, 1, recompute, storage, data)
                     .backend(rank -> counted.ops(ops)).build()) {
            assertThat(l.describe()).contains("saved activations in " + storage);
            // the batch's buffers are the rank's host arena (RankStep's), the rest the backend's memory
            long want = plan.total() - plan.batch();
            assertThat(l.modelBytes() + l.optimizerStateBytes()).as("the learner's own count").isEqualTo(want);
            assertThat(counted.live.get()).as("allocated").isEqualTo(want);
            assertThat(l.fit(1, null).get(0).trainLoss()).isFinite(); // and it trains in that memory
            assertThat(counted.peak.get()).as("peak").isEqualTo(want);
        }
        assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, recompute, storage, 0, 1)).isEqualTo(plan.total());
        MemoryPlan fp32 = MemoryPlan.of(CONFIG, B, T, recompute, 0, 1, DType.FP32);
        if (recompute.holdsLayers()) { // nothing per layer to store: the same plan
            assertThat(plan).isEqualTo(fp32);
        } else {
            assertThat(plan.activations()).isLessThan(fp32.activations());
            assertThat(plan.modelStates()).isEqualTo(fp32.modelStates());
        }
    }

    @Test
    void aBudgetFitsALargerBatchWithSixteenBitStorage() {
        GptConfig gpt2 = new GptConfig(1024, 50257, 50304, 12, 12, 768);
        long budget = 16L << 30;
        int f32 = MemoryPlan.largestBatch(gpt2, 1024, Recompute.NONE, 0, 1, DType.FP32, budget, 1024);
        int b16 = MemoryPlan.largestBatch(gpt2, 1024, Recompute.NONE, 0, 1, DType.BF16, budget, 1024);
        assertThat(f32).isEqualTo(MemoryPlan.largestBatch(gpt2, 1024, Recompute.NONE, budget, 1024));
        assertThat(b16).isGreaterThan(f32);
        BatchSizeFinder.Choice c = BatchSizeFinder.choose(gpt2, 1024, Recompute.NONE, DType.BF16, 0, budget, 1,
                null, 1);
        assertThat(c.batch()).isEqualTo(b16);
    }
}
