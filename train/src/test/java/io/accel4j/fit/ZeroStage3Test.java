package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import io.accel4j.train.CountingMemory;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.Embedding;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.LmHead;
import io.accel4j.nn.Module;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.TransformerBlock;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ZeRO-3 on models of one's own ({@link UnitSharding}): a deep MLP and a small character transformer with an untied head
 * train on 2 ranks as on 1 rank with twice the batch, and as ZeRO-1 on the same 2 ranks (bit for bit without
 * clipping); each rank allocates less than under ZeRO-2 (counted on the allocator); checkpoints are whole (they resume
 * under ZeRO-1) and resume bit for bit.
 */
class ZeroStage3Test {

    /** 3 features → 6 hidden layers of 32 → 3 classes: 7 units, none larger than a seventh of the model and a bit. */
    static Module deepMlp() {
        List<Module> layers = new ArrayList<>();
        layers.add(Linear.gelu("fc0", 3, 32));
        for (int i = 1; i < 6; i++) {
            layers.add(Linear.gelu("fc" + i, 32, 32));
        }
        layers.add(Linear.of("head", 32, 3));
        return new Sequential("mlp", layers);
    }

    static LearnerBuilder mlp(int ranks, int B) {
        return Learner.of(ZeroStage3Test::deepMlp).features(3).classes(3).batch(B, 1).optimizer(AdamW.of(0.01f))
                .schedule(LrSchedule.warmupCosine(5e-3f, 3, 30, 0f)).ranks(ranks).threads(2).seed(5)
                .data(LearnerTest.data(9));
    }

    @Test
    void twoRanksTrainAsOneRankWithTwiceTheBatchAndAsZeroOne() {
        List<StepMetrics> one, z1, z3;
        float[] p1, pz1, pz3;
        try (Learner a = mlp(1, 32).gradClip(1f).build()) {
            one = a.fit(20, null);
            p1 = params(a);
        }
        try (Learner b = mlp(2, 16).gradClip(1f).zero(3).build()) {
            assertThat(b.describe()).contains("ZeRO-3");
            z3 = b.fit(20, null);
            pz3 = params(b);
        }
        // as LearnerTest's DDP: fp32 sums over 32 rows in another order (~1e-7 relative a step), compounded by AdamW
        for (int s = 0; s < 20; s++) {
            assertThat(z3.get(s).trainLoss()).as("step %d", s).isCloseTo(one.get(s).trainLoss(), within(1e-4));
        }
        System.out.printf("MLP, ZeRO-3 on 2 ranks vs 1 rank: largest |parameter difference| %.2e%n", maxDiff(pz3, p1));
        for (int i = 0; i < p1.length; i++) {
            assertThat(pz3[i]).as("parameter %d", i).isCloseTo(p1[i], within(2e-4f));
        }
        assertThat(one.get(19).trainLoss()).isLessThan(one.get(0).trainLoss() * 0.8);

        // the same 2 ranks: without clipping the reduce-scatter adds the same two terms as ZeRO-1's all-reduce
        try (Learner c = mlp(2, 16).zero(1).build(); Learner d = mlp(2, 16).zero(3).build()) {
            z1 = c.fit(12, null);
            pz1 = params(c);
            z3 = d.fit(12, null);
            pz3 = params(d);
        }
        assertThat(pz3).as("ZeRO-3 ≡ ZeRO-1 without clipping").containsExactly(pz1);
        for (int s = 0; s < 12; s++) {
            assertThat(z3.get(s).trainLoss()).isEqualTo(z1.get(s).trainLoss());
            // the norm is the sum of two float64 shard sums: DDP's within the kernel's grouping of its fp32 lanes
            assertThat(z3.get(s).gradNorm()).isCloseTo(z1.get(s).gradNorm(), within(1e-6 * z1.get(s).gradNorm()));
        }
    }

    /**
     * Embedding, 2 blocks, final LayerNorm, untied head: 5 units; V 13, C 16, 2 heads, T 8. SGD with momentum: its
     * update is linear in the gradient, so a rounding of the gradient stays a rounding of the parameters (AdamW's
     * first steps, ±lr whatever the gradient's size, would turn a rounding of a near-zero gradient into ±lr).
     */
    static LearnerBuilder chars(int ranks, int B) {
        return Learner.of(() -> new Sequential("chars", Embedding.tokensAndPositions("embed", 13, 16, 8),
                        new TransformerBlock("h0", 16, 2), new TransformerBlock("h1", 16, 2),
                        new LayerNorm("ln_f", 16), LmHead.untied("lm_head", 16, 13)))
                .tokens(13).classes(13).batch(B, 8).optimizer(io.accel4j.optim.Sgd.of(0.9f, 0f))
                .schedule(LrSchedule.constant(0.1f)).ranks(ranks).threads(2).seed(3).data(tokens());
    }

    @Test
    void aTransformerWithAnUntiedHeadTrainsAsOneRankWithTwiceTheBatchAndAsDdp() {
        List<StepMetrics> one, ddp, z3;
        float[] p1, p2, pz3;
        try (Learner a = chars(1, 4).build()) {
            one = a.fit(8, null);
            p1 = params(a);
        }
        try (Learner a = chars(2, 2).build(); Learner b = chars(2, 2).zero(3).build()) {
            ddp = a.fit(8, null);
            p2 = params(a);
            z3 = b.fit(8, null);
            pz3 = params(b);
        }
        assertThat(pz3).as("ZeRO-3 ≡ DDP on the same 2 ranks").containsExactly(p2);
        // fp32 sums over 32 positions in another order, through attention and LayerNorm: ~1e-6 relative a step,
        // 8 steps of SGD with momentum (the sum of the rate-weighted gradients, each O(1))
        for (int s = 0; s < 8; s++) {
            assertThat(z3.get(s).trainLoss()).as("step %d", s).isEqualTo(ddp.get(s).trainLoss())
                    .isCloseTo(one.get(s).trainLoss(), within(1e-5));
        }
        System.out.printf("chars, ZeRO-3 on 2 ranks vs 1 rank: largest |parameter difference| %.2e%n", maxDiff(pz3, p1));
        for (int i = 0; i < p1.length; i++) {
            assertThat(pz3[i]).as("parameter %d", i).isCloseTo(p1[i], within(1e-5f));
        }
        assertThat(one.get(7).trainLoss()).isLessThan(one.get(0).trainLoss());
    }

    @Test
    void eachRankAllocatesLessThanUnderZeroTwo() {
        long[] two = allocated(2), three = allocated(3);
        System.out.printf("rank 0 bytes after build / peak in a step: ZeRO-2 %d / %d, ZeRO-3 %d / %d (%.2f, %.2f)%n",
                two[0], two[1], three[0], three[1], (double) three[0] / two[0], (double) three[1] / two[1]);
        assertThat(three[0]).as("held after build").isLessThan(two[0]);
        assertThat(three[1]).as("peak during a step").isLessThan(two[1]);
    }

    /** Rank 0's live bytes after build and its peak over two steps, counted on its backend's allocator. */
    private static long[] allocated(int stage) {
        CountingMemory[] memory = {new CountingMemory(), new CountingMemory()};
        try (Parallel pool0 = new Parallel(1); Parallel pool1 = new Parallel(1)) {
            Ops[] ops = {memory[0].ops(new CpuOps(pool0)), memory[1].ops(new CpuOps(pool1))};
            try (Learner l = mlp(2, 16).zero(stage).backend(r -> ops[r]).build()) {
                long built = memory[0].live.get();
                l.fit(2, null);
                return new long[] {built, memory[0].peak.get()};
            }
        }
    }

    @Test
    void checkpointsAreWholeAndResumeBitForBit(@TempDir Path dir) throws Exception {
        List<StepMetrics> straight;
        float[] end;
        try (Learner a = mlp(2, 16).zero(3).gradAccum(2).build()) {
            straight = a.fit(12, null);
            end = params(a);
        }
        try (Learner a = mlp(2, 16).zero(3).gradAccum(2).build()) {
            a.fit(5, null);
            a.save(dir);
        }
        try (Learner c = mlp(2, 16).zero(3).gradAccum(2).seed(99).build()) { // the checkpoint's parameters win
            c.resume(dir);
            assertThat(c.step()).isEqualTo(5);
            List<StepMetrics> rest = c.fit(7, null);
            for (int s = 0; s < 7; s++) {
                assertThat(rest.get(s).trainLoss()).as("step %d", 5 + s).isEqualTo(straight.get(5 + s).trainLoss());
            }
            assertThat(params(c)).containsExactly(end);
        }
        // whole: the file holds every parameter and moment in the flat layout, so ZeRO-1 continues it; with one
        // micro-batch a step and no clipping ZeRO-1 and ZeRO-3 agree bit for bit
        try (Learner a = mlp(2, 16).zero(3).build()) {
            a.fit(5, null);
            a.save(dir.resolve("whole"));
            List<StepMetrics> z3 = a.fit(4, null);
            float[] p3 = params(a);
            try (Learner b = mlp(2, 16).zero(1).seed(99).build()) {
                b.resume(dir.resolve("whole"));
                List<StepMetrics> z1 = b.fit(4, null);
                for (int s = 0; s < 4; s++) {
                    assertThat(z1.get(s).trainLoss()).isEqualTo(z3.get(s).trainLoss());
                }
                assertThat(params(b)).containsExactly(p3);
            }
        }
    }

    @Test
    void evaluateAndPredictRunTheShardedModel() {
        try (Learner a = mlp(1, 16).build(); Learner b = mlp(2, 16).zero(3).build()) {
            DataSource eval = LearnerTest.data(4).open(0, 1, 16, 1);
            DataSource eval2 = LearnerTest.data(4).open(0, 1, 16, 1);
            assertThat(b.evaluate(eval2, 2)).isEqualTo(a.evaluate(eval, 2)); // the same initial parameters
            try (Arena host = Arena.ofConfined()) {
                MemorySegment x = host.allocate(3L * 16 * Float.BYTES), y = host.allocate(16L * Integer.BYTES);
                LearnerTest.data(7).open(0, 1, 16, 1).next(x, y);
                assertThat(b.predict(x, 16, 1)).containsExactly(a.predict(x, 16, 1));
            }
        }
    }

    @Test
    void aModelThatIsNotASequenceIsRefusedNamingIt() {
        assertThatThrownBy(() -> Learner.of(() -> Linear.of("solo", 3, 3)).features(3).classes(3).batch(8, 1)
                .ranks(2).zero(3).data(LearnerTest.data(1)).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("ZeRO-3").hasMessageContaining("'solo'").hasMessageContaining("Sequential");
    }

    static double maxDiff(float[] a, float[] b) {
        double most = 0;
        for (int i = 0; i < a.length; i++) {
            most = Math.max(most, Math.abs(a[i] - b[i]));
        }
        return most;
    }

    @Test
    void aParameterSharedAcrossChildrenIsRefusedBeforeAllocatingNamingBoth() {
        assertThatThrownBy(() -> Learner.of(() -> {
            Embedding embed = Embedding.tokensAndPositions("embed", 13, 16, 8);
            return new Sequential("tied", embed, new LayerNorm("ln_f", 16), LmHead.tied("lm_head", embed));
        }).tokens(13).classes(13).batch(2, 8).ranks(2).zero(3).data(tokens()).build())
                .isInstanceOf(io.accel4j.nn.ShapeException.class)
                .hasMessageContaining("'tied.lm_head' (unit 2)").hasMessageContaining("'tied.embed.wte' of unit 0")
                .hasMessageContaining("ZeRO-2");
    }

    /** The whole model's parameters, gathered from every rank's shards. */
    static float[] params(Learner l) {
        try (Arena a = Arena.ofShared()) {
            MemorySegment host = a.allocate(l.wholeTable().count() * Float.BYTES, 64);
            l.gatherParameters(host);
            return host.toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    /** Random windows of a fixed token sequence over 13 symbols: the inputs and the next tokens. */
    static DataSource.Factory tokens() {
        Random r = new Random(11);
        int[] ids = new int[400];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i % 5 == 0 ? r.nextInt(13) : (ids[Math.max(0, i - 1)] + 1) % 13;
        }
        return (rank, ranks, B, T) -> new DataSource() {
            long batch;

            @Override
            public void next(MemorySegment inputs, MemorySegment targets) {
                for (int b = 0; b < B; b++) {
                    long row = batch * ranks * B + (long) rank * B + b; // the global batch's rows, this rank's own
                    int start = (int) (row * 7 % (ids.length - T - 1));
                    for (int t = 0; t < T; t++) {
                        inputs.setAtIndex(ValueLayout.JAVA_INT, (long) b * T + t, ids[start + t]);
                        targets.setAtIndex(ValueLayout.JAVA_INT, (long) b * T + t, ids[start + t + 1]);
                    }
                }
                batch++;
            }
        };
    }
}
