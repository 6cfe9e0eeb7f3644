package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java API on a model of one's own: two data-parallel ranks train as one rank with twice the batch does (up to
 * the order of fp32 sums), and a run writes its metrics and plot.
 */
class LearnerTest {

    /** A fixed data set of 3 features and 3 classes; global batch s is rows [s·G, (s+1)·G) wrapping, rank r its own B. */
    static DataSource.Factory data(long seed) {
        int n = 512;
        Random r = new Random(seed);
        float[] x = new float[3 * n];
        int[] y = new int[n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < 3; j++) {
                x[3 * i + j] = (float) r.nextGaussian();
            }
            y[i] = x[3 * i] + x[3 * i + 1] * x[3 * i + 2] > 0 ? (x[3 * i + 2] > 0.5 ? 2 : 1) : 0;
        }
        return (rank, ranks, B, T) -> new DataSource.Resumable() {
            long next = (long) rank * B;

            @Override
            public void skip(long batches) {
                next += batches * ranks * B;
            }

            @Override
            public void next(MemorySegment inputs, MemorySegment targets) {
                for (int j = 0; j < B; j++) {
                    int i = (int) ((next + j) % n);
                    for (int k = 0; k < 3; k++) {
                        inputs.setAtIndex(ValueLayout.JAVA_FLOAT, 3L * j + k, x[3 * i + k]);
                    }
                    targets.setAtIndex(ValueLayout.JAVA_INT, j, y[i]);
                }
                next += (long) ranks * B;
            }
        };
    }

    static LearnerBuilder learner(int ranks, int B) {
        return Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 17), Linear.of("fc2", 17, 3)))
                .features(3).classes(3).batch(B, 1).optimizer(AdamW.of(0.01f))
                .schedule(LrSchedule.warmupCosine(5e-3f, 3, 30, 0f)).gradClip(1f).ranks(ranks).threads(2).seed(5)
                .data(data(9));
    }

    @Test
    void twoRanksTrainAsOneRankWithTwiceTheBatch() {
        List<StepMetrics> one, two;
        float[] p1, p2;
        try (Learner a = learner(1, 32).build()) {
            one = a.fit(30, null);
            p1 = params(a);
        }
        try (Learner b = learner(2, 16).build()) {
            two = b.fit(30, null);
            p2 = params(b);
        }
        // fp32 sums over 32 rows in another order: ~1e-7 relative per step, compounded by AdamW over 30 steps
        for (int s = 0; s < 30; s++) {
            assertThat(two.get(s).trainLoss()).as("step %d", s).isCloseTo(one.get(s).trainLoss(), within(1e-4));
        }
        for (int i = 0; i < p1.length; i++) {
            assertThat(p2[i]).as("parameter %d", i).isCloseTo(p1[i], within(2e-4f));
        }
        assertThat(one.get(29).trainLoss()).isLessThan(one.get(0).trainLoss() * 0.8);
    }

    @Test
    void bf16AndFp16RunAndAccumulationMatchesALargerBatch(@TempDir Path dir) throws Exception {
        try (Learner a = learner(1, 8).precision(DType.BF16).gradAccum(4).out(dir).build()) {
            List<StepMetrics> m = a.fit(30, null);
            assertThat(m.get(29).trainLoss()).isLessThan(m.get(0).trainLoss());
        }
        assertThat(Files.readAllLines(dir.resolve("metrics.jsonl"))).hasSize(30);
        assertThat(Files.size(dir.resolve("loss.png"))).isPositive();
        try (Learner a = learner(2, 8).precision(DType.FP16).build()) {
            List<StepMetrics> m = a.fit(10, null);
            assertThat(m.get(9).lossScale()).isPositive();
        }
        DelayedScaling recipe = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0, DelayedScaling.Algorithm.MAX);
        try (Learner a = learner(2, 16).fp8(recipe).build()) {
            List<StepMetrics> m = a.fit(20, null);
            assertThat(a.describe()).contains("FP8");
            assertThat(a.network().fp8().linears()).isEqualTo(2);
            assertThat(m.get(19).trainLoss()).isLessThan(m.get(0).trainLoss());
        }
    }

    @Test
    void zeroOneIsDdpBitForBitAndZeroTwoWithoutClipping() {
        for (float clip : new float[] {1f, 0f}) {
            List<StepMetrics> ddp, z1, z2;
            float[] p0, p1, p2;
            try (Learner a = learner(2, 16).gradClip(clip).build()) {
                ddp = a.fit(12, null);
                p0 = params(a);
            }
            try (Learner b = learner(2, 16).gradClip(clip).zero(1).build()) {
                z1 = b.fit(12, null);
                p1 = params(b);
                assertThat(b.describe()).contains("ZeRO-1");
            }
            try (Learner c = learner(2, 16).gradClip(clip).zero(2).build()) {
                z2 = c.fit(12, null);
                p2 = params(c);
            }
            assertThat(p1).as("ZeRO-1, clip %s", clip).containsExactly(p0);
            for (int s = 0; s < 12; s++) {
                assertThat(z1.get(s).trainLoss()).isEqualTo(ddp.get(s).trainLoss());
                assertThat(z1.get(s).gradNorm()).isEqualTo(ddp.get(s).gradNorm());
            }
            if (clip == 0) { // 2 ranks: the reduce-scatter adds the same two terms; the norm only reports
                assertThat(p2).as("ZeRO-2 without clipping").containsExactly(p0);
            } else { // the norm is a sum of two shard sums: a rounding of DDP's, and so is the clip factor
                for (int i = 0; i < p0.length; i++) {
                    assertThat(p2[i]).isCloseTo(p0[i], within(1e-5f));
                }
            }
            for (int s = 0; s < 12; s++) {
                assertThat(z2.get(s).gradNorm()).isCloseTo(ddp.get(s).gradNorm(), within(1e-6 * ddp.get(s).gradNorm()));
            }
        }
    }

    @Test
    void zeroNeedsRanksAndAKnownStage() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> learner(1, 8).zero(1).build())
                .hasMessageContaining("ranks(2)");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> learner(2, 8).zero(4))
                .hasMessageContaining("0, 1, 2 or 3");
    }

    @Test
    void aResumedRunContinuesBitForBitOnEveryStrategy(@TempDir Path dir) throws Exception {
        record Case(int ranks, int zero, int B, LearnerBuilder extra) {}
        DelayedScaling recipe = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0, DelayedScaling.Algorithm.MAX);
        for (int zero = 0; zero <= 2; zero++) {
            int ranks = zero == 0 ? 1 : 2;
            Path ckpt = dir.resolve("zero" + zero);
            List<StepMetrics> straight;
            float[] end;
            java.util.function.Supplier<LearnerBuilder> b = () -> learner(ranks, 16).gradAccum(2);
            final int z = zero;
            java.util.function.Supplier<LearnerBuilder> make = z == 0
                    ? () -> b.get().fp8(recipe).optimizer(io.accel4j.optim.Lion.of(0.1f))
                    : () -> b.get().zero(z);
            try (Learner a = make.get().build()) {
                straight = a.fit(16, null);
                end = params(a);
            }
            try (Learner a = make.get().build()) {
                a.fit(7, null);
                a.save(ckpt);
            }
            try (Learner c = make.get().seed(99).build()) { // other initial parameters: the checkpoint's win
                c.resume(ckpt);
                assertThat(c.step()).isEqualTo(7);
                List<StepMetrics> rest = c.fit(9, null);
                for (int s = 0; s < 9; s++) {
                    assertThat(rest.get(s).trainLoss()).as("ZeRO %d, step %d", z, 7 + s)
                            .isEqualTo(straight.get(7 + s).trainLoss());
                    assertThat(rest.get(s).step()).isEqualTo(7 + s);
                }
                assertThat(params(c)).as("ZeRO %d", z).containsExactly(end);
            }
        }
    }

    @Test
    void aCheckpointOfAnotherTreeOrOptimizerIsRefusedNamingWhat(@TempDir Path dir) throws Exception {
        try (Learner a = learner(1, 8).build()) {
            a.fit(2, null);
            a.save(dir);
        }
        try (Learner other = Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 9), Linear.of("fc2", 9, 3)))
                .features(3).classes(3).batch(8, 1).data(data(9)).build()) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> other.resume(dir))
                    .isInstanceOf(io.accel4j.nn.ShapeException.class)
                    .hasMessageContaining("mlp.fc1.weight[9, 3]").hasMessageContaining("mlp.fc1.weight[17, 3]");
        }
        try (Learner sgd = learner(1, 8).optimizer(io.accel4j.optim.Sgd.of(0.9f, 0f)).build()) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> sgd.resume(dir))
                    .isInstanceOf(io.accel4j.train.io.FileFormatException.class)
                    .hasMessageContaining("state.bin").hasMessageContaining("'m'");
        }
    }

    @Test
    void aStrategyTheBackendCannotRunIsRefusedBeforeTraining() {
        io.accel4j.train.StrictMemory device = new io.accel4j.train.StrictMemory();
        try (io.accel4j.cpu.Parallel pool = new io.accel4j.cpu.Parallel(1)) {
            io.accel4j.core.ops.Ops ops = device.ops(new io.accel4j.cpu.ops.CpuOps(pool));
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> learner(2, 8).backend(r -> ops).build())
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("takes host buffers and the network is in strict test device memory");
            try (Learner one = learner(1, 8).backend(r -> ops).build()) { // one rank on it trains
                assertThat(one.fit(3, null).get(2).trainLoss()).isFinite();
            }
        }
    }

    @Test
    void oneRankPerProcessOverACommunicatorIsTheInProcessRun(@TempDir Path dir) throws Exception {
        List<StepMetrics> inProcess;
        float[] p0;
        try (Learner a = learner(2, 16).zero(1).build()) {
            inProcess = a.fit(8, null);
            p0 = params(a);
        }
        // as under mpirun: each "process" (a thread here) builds its own learner for its rank of the communicator
        try (io.accel4j.collectives.InProcessGroup g = io.accel4j.collectives.InProcessGroup.create(2)) {
            List<Object[]> runs = g.run(comm -> {
                try (Learner l = learner(1, 16).threads(1).zero(1).communicator(comm).out(dir).build()) {
                    List<StepMetrics> m = l.fit(8, null);
                    l.save(dir.resolve("ckpt"));
                    return new Object[] {m, params(l)};
                }
            });
            for (Object[] run : runs) {
                @SuppressWarnings("unchecked")
                List<StepMetrics> m = (List<StepMetrics>) run[0];
                for (int s = 0; s < 8; s++) {
                    assertThat(m.get(s).trainLoss()).as("step %d", s).isEqualTo(inProcess.get(s).trainLoss());
                }
                assertThat((float[]) run[1]).containsExactly(p0);
            }
        }
        assertThat(Files.readAllLines(dir.resolve("metrics.jsonl"))).as("rank 0 alone writes").hasSize(8);
        assertThat(dir.resolve("ckpt").resolve("model.bin")).exists();
        try (io.accel4j.collectives.InProcessGroup g = io.accel4j.collectives.InProcessGroup.create(2)) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> learner(2, 8).communicator(g.communicator(0))
                    .build()).hasMessageContaining("ranks(2) and communicator(2 ranks)");
        }
    }

    static float[] params(Learner l) {
        float[] p = new float[(int) l.network().table().count()];
        MemorySegment.copy(l.network().params(), ValueLayout.JAVA_FLOAT, 0, p, 0, p.length);
        return p;
    }
}
