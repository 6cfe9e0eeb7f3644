package io.accel4j.train.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.CountingMemory;
import io.accel4j.fit.Learner;
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
 * The memory plan of 16-bit gradient storage ({@code --grad-storage}) is every byte a model and its trainer allocate
 * (counted by {@link CountingMemory}), for every recompute mode and with fp32 or 16-bit activations; and it lets a
 * larger batch fit a budget than 16-bit activations alone.
 */
class HalfGradientPlanTest {

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
                a.add(Arguments.of(d, r, d));
            }
        }
        a.add(Arguments.of(DType.FP32, Recompute.NONE, DType.BF16)); // fp32 matmuls and activations, bf16 gradients
        return a.stream();
    }

    @ParameterizedTest(name = "{0} precision, recompute {1}, {2} gradients")
    @MethodSource("cases")
    void thePlanIsEveryByteALearnerAllocates(DType operands, Recompute recompute, DType gradients)
            throws IOException {
        int B = 5;
        Precision precision = Precision.of(operands).withGradients(gradients);
        DType acts = precision.activationStorage();
        MemoryPlan plan = MemoryPlan.of(CONFIG, B, T, recompute, 0, 1, acts, gradients);
        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(1).lr(1e-3f).precision(precision)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
        CountingMemory counted = new CountingMemory();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin")); TokenSource data = Gpt2LearnerRuns.source(train, cfg);
             Learner l = Gpt2LearnerRuns.builder(CONFIG, cfg, 1, recompute, acts, data)
                     .backend(rank -> counted.ops(ops)).build()) {
            // the batch's buffers are the rank's host arena (RankStep's), the rest the backend's memory
            long want = plan.total() - plan.batch();
            assertThat(l.modelBytes() + l.optimizerStateBytes()).as("the learner's own count").isEqualTo(want);
            assertThat(counted.live.get()).as("allocated").isEqualTo(want);
            assertThat(l.fit(1, null).get(0).trainLoss()).isFinite(); // and it trains in that memory
            assertThat(counted.peak.get()).as("peak").isEqualTo(want);
        }
        assertThat(BatchSizeFinder.trialStep(CONFIG, ops, B, T, recompute, acts, gradients, 0, 1))
                .isEqualTo(plan.total());
        MemoryPlan fp32 = MemoryPlan.of(CONFIG, B, T, recompute, 0, 1, acts);
        assertThat(plan.gradients()).isLessThan(fp32.gradients());
        assertThat(plan.total() - plan.gradients()).isEqualTo(fp32.total() - fp32.gradients());
    }

    @Test
    void thePlannersSixteenBitGradientRowsAreStageZerosWithTheTrainersMemory() {
        GptConfig xl = new GptConfig(1024, 50257, 50304, 48, 25, 1600);
        Cluster cluster = new Cluster(8, 80L << 30, 25e9, 50e12);
        List<Layout> rows = new DataParallelLayouts(DType.BF16, DType.BF16).layouts(xl, 64, 1024, cluster);
        assertThat(rows).isNotEmpty().allSatisfy(l -> {
            assertThat(l.zeroStage()).isBetween(0, 1);
            assertThat(l.strategy()).endsWith("+bf16+bf16-grads");
            assertThat(l.trainArgs()).containsSubsequence("--precision", "bf16", "--grad-storage", "bf16");
            assertThat(l.memory()).isEqualTo(MemoryPlan.of(xl, l.microBatch(), 1024, l.recompute(), l.zeroStage(),
                    8, DType.BF16, DType.BF16));
        });
        // ZeRO-1 shards AdamW's moments (8Ψ → 8Ψ/8) and keeps DDP's whole 16-bit gradients
        Layout ddp = rows.stream().filter(l -> l.zeroStage() == 0 && l.recompute() == Recompute.NONE).findFirst()
                .orElseThrow();
        Layout zero1 = rows.stream().filter(l -> l.zeroStage() == 1 && l.recompute() == Recompute.NONE).findFirst()
                .orElseThrow();
        assertThat(zero1.strategy()).isEqualTo("ZeRO-1+bf16+bf16-grads");
        assertThat(zero1.trainArgs()).containsSubsequence("--zero", "1");
        assertThat(zero1.memory().gradients()).isEqualTo(ddp.memory().gradients());
        long psi = new io.accel4j.train.model.ParameterLayout(xl).count();
        assertThat(zero1.memory().optimizer()).isEqualTo(8 * ((psi + 7) / 8));
        java.io.StringWriter out = new java.io.StringWriter(), err = new java.io.StringWriter();
        picocli.CommandLine cl = io.accel4j.cli.Main.commandLine();
        cl.setOut(new java.io.PrintWriter(out, true));
        cl.setErr(new java.io.PrintWriter(err, true));
        int code = cl.execute("plan", "--model", "gpt2-xl", "--global-batch", "64", "--devices", "8",
                "--device-memory", "80g", "--bf16-grads");
        assertThat(code).as(err.toString()).isZero();
        assertThat(out.toString()).contains("DDP+bf16+bf16-grads", "ZeRO-1+bf16+bf16-grads", "+bf16-grads: train "
                + "--precision bf16 --grad-storage bf16");
        assertThatThrownBy(() -> new DataParallelLayouts(DType.BF16, DType.FP16))
                .hasMessage("the planner's gradient storage is fp32 or bf16, got FP16");
    }

    @Test
    void theOffloadedRowsWithSixteenBitGradientsAreTheTrainersDeviceSide() {
        GptConfig gpt2 = new GptConfig(1024, 50257, 50304, 12, 12, 768);
        Cluster cluster = new Cluster(2, 24L << 30, 25e9, 50e12);
        List<Layout> half = new OffloadLayouts(DType.BF16, DType.BF16).layouts(gpt2, 32, 1024, cluster);
        List<Layout> fp32 = new OffloadLayouts().layouts(gpt2, 32, 1024, cluster);
        long psi = new io.accel4j.train.model.ParameterLayout(gpt2).count();
        assertThat(half).hasSameSizeAs(fp32).allSatisfy(l -> {
            assertThat(l.strategy()).isEqualTo("DDP+off+bf16+bf16-grads");
            assertThat(l.trainArgs()).containsSubsequence("--offload-optimizer", "--precision", "bf16",
                    "--grad-storage", "bf16");
            MemoryPlan device = OffloadPlan.of(gpt2, l.microBatch(), 1024, l.recompute(), DType.BF16, DType.BF16)
                    .device();
            assertThat(l.memory()).isEqualTo(device);
            assertThat(device.optimizer()).isZero();
            assertThat(device.total()).isEqualTo(MemoryPlan.of(gpt2, l.microBatch(), 1024, l.recompute(), 0, 2,
                    DType.BF16, DType.BF16).total() - 8 * psi);
        });
        // the device's gradients: 16-bit blocks, fp32 embeddings, against 4 bytes a parameter
        assertThat(half.get(0).memory().gradients()).isLessThan(fp32.get(0).memory().gradients());
        assertThatThrownBy(() -> new OffloadLayouts(DType.FP16, DType.BF16)).isInstanceOf(
                IllegalArgumentException.class);
        java.io.StringWriter out = new java.io.StringWriter(), err = new java.io.StringWriter();
        picocli.CommandLine cl = io.accel4j.cli.Main.commandLine();
        cl.setOut(new java.io.PrintWriter(out, true));
        cl.setErr(new java.io.PrintWriter(err, true));
        int code = cl.execute("plan", "--model", "gpt2", "--global-batch", "32", "--devices", "2",
                "--device-memory", "24g", "--offload", "--bf16-grads");
        assertThat(code).as(err.toString()).isZero();
        assertThat(out.toString()).contains("DDP+off+bf16+bf16-grads");
    }

    @Test
    void aBudgetFitsALargerBatchWithSixteenBitGradients() {
        // GPT-2 XL (1.5B), whose blocks hold 97 % of the parameters, at T = 1024 in 80 GiB (docs/PERFORMANCE.md)
        GptConfig gpt2 = new GptConfig(1024, 50257, 50304, 48, 25, 1600);
        long budget = 80L << 30;
        int acts = MemoryPlan.largestBatch(gpt2, 1024, Recompute.NONE, 0, 1, DType.BF16, budget, 1024);
        int both = MemoryPlan.largestBatch(gpt2, 1024, Recompute.NONE, 0, 1, DType.BF16, DType.BF16, budget, 1024);
        assertThat(both).isGreaterThan(acts);
        BatchSizeFinder.Choice c = BatchSizeFinder.choose(gpt2, 1024, Recompute.NONE, DType.BF16, DType.BF16, 0,
                budget, 1, null, 1);
        assertThat(c.batch()).isEqualTo(both);
        assertThatThrownBy(() -> MemoryPlan.of(gpt2, 1, 1024, Recompute.NONE, 2, 2, DType.BF16, DType.BF16))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("16-bit gradients do not go with ZeRO stage 2 yet");
    }
}
