package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.BatchSizeFinder;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
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
import org.junit.jupiter.params.provider.ValueSource;

/**
 * ZeRO-1 over 16-bit gradients ({@code --zero 1 --grad-storage bf16}) on the CLI's GPT-2 {@link Learner}
 * ({@code fit.HalfGradientSync} over {@code fit.ZeroSharding} stage 1), each in-process rank a learner over its
 * communicator: bit for bit DDP over them (parameters, norms, losses and the llm.c checkpoint's bytes, at 2 and 3
 * ranks, whose chunks cut layers unevenly); one rank at twice the batch within the roundings' tolerance; its memory
 * plan is what every rank allocates, counted by the allocator; ZeRO-2/3 are refused.
 */
class ZeroOneHalfGradientsTest {

    private static final int STEPS = 4;
    /** As {@link SixteenBitGradientsTest}'s NORM_REL (ZeRO-1 is DDP's bits, so DDP's bound): 3 bf16 roundings. */
    private static final double NORM_REL = 3 * 0x1p-8;
    /** As {@link SixteenBitGradientsTest}'s PARAM_REL: ‖p₂ − p₁‖ / ‖p₁ − p₀‖ under those roundings. */
    private static final double PARAM_REL = 0.05;
    /**
     * The exchange of the gradient norm's partial sums, 2 floats a rank ({@code fit.DataParallel}'s
     * {@code ValueExchange}) in the backend's memory, not planned.
     */
    private static long exchange(int ranks) {
        return ranks * 2L * Float.BYTES;
    }

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;
    private static TokenFile small;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
        small = Gpt2Fixtures.tokenFile(tmp.resolve("small.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        small.close();
        pool.close();
    }

    private record Run(float[] params, double[] norms, double[] losses, byte[] state) {}

    private static TrainConfig config(int batch, int zero) {
        return TrainConfig.builder().batch(batch).seq(5).steps(STEPS).lr(1e-2f).eps(1e-5f).gradClip(0.5f)
                .weightDecay(0.01f).dataOrder(SampleOrder.Mode.SEQUENTIAL).bucketBytes(0).zeroStage(zero)
                .precision(Precision.of(DType.BF16).withGradients(DType.BF16)).build();
    }

    /** {@code STEPS} steps, then a checkpoint into {@code dir} (its state file's bytes returned, rank 0's). */
    private static Run run(CpuOps o, int batch, int zero, Communicator comm, Path dir) throws IOException {
        TrainConfig cfg = config(batch, zero);
        try (TokenSource data = Gpt2LearnerRuns.source(small, cfg);
             Learner l = (comm == null ? Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, 1, Recompute.NONE, DType.BF16,
                     data) : Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, Recompute.NONE, DType.BF16, data))
                     .backend(r -> o).build()) {
            Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, cfg, data, 1);
            assertThat(l.describe()).contains(zero > 0 ? "(ZeRO-" + zero + ")" : "rank");
            List<StepMetrics> steps = l.fit(STEPS, null);
            boolean lead = comm == null || comm.rank() == 0;
            Path model = Gpt2LearnerRuns.checkpoints(l, lead, Gpt2Fixtures.TINY, cfg, data).save(dir);
            byte[] state = lead ? Files.readAllBytes(model.resolveSibling(model.getFileName().toString()
                    .replace("model_", "state_"))) : null;
            return new Run(Gpt2LearnerRuns.rankParameters(l, comm == null ? 0 : comm.rank()),
                    Gpt2LearnerRuns.norms(steps).clone(), Gpt2LearnerRuns.losses(steps), state);
        }
    }

    private static List<Run> ranks(int n, int batch, int zero, String dir) {
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(60))) {
            List<Run> runs = g.run(comm -> {
                try (Parallel p = new Parallel(1)) {
                    return run(new CpuOps(p), batch, zero, comm, tmp.resolve(dir));
                }
            });
            for (Run r : runs) { // every rank holds the very same parameters
                assertThat(r.params()).containsExactly(runs.get(0).params());
            }
            return runs;
        }
    }

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void zeroOneIsDdpBitForBitCheckpointIncluded(int n) {
        Run ddp = ranks(n, 2, 0, "ddp" + n).get(0), zero = ranks(n, 2, 1, "zero" + n).get(0);
        assertThat(zero.params()).as("parameters").containsExactly(ddp.params());
        assertThat(zero.norms()).as("gradient norms").containsExactly(ddp.norms());
        assertThat(zero.losses()).as("train losses").containsExactly(ddp.losses());
        // the moments gathered from the ranks' chunks are DDP's whole ones, so the files are the same bytes
        assertThat(java.util.Arrays.mismatch(zero.state(), ddp.state())).as("the state files' first differing byte")
                .isEqualTo(-1);
    }

    @Test
    void zeroOneIsOneRankWithTwiceTheBatch() throws IOException {
        Run one = run(ops, 4, 0, null, tmp.resolve("one"));
        Run zero = ranks(2, 2, 1, "zero-vs-one").get(0);
        for (int s = 0; s < STEPS; s++) {
            assertThat(zero.norms()[s]).as("grad norm of step %d", s).isCloseTo(one.norms()[s],
                    offset(NORM_REL * one.norms()[s]));
        }
        float[] p0;
        try (Gpt2 init = Gpt2Fixtures.model(ops, 4, 1)) {
            p0 = Gpt2Fixtures.floats(init.params());
        }
        double diff2 = 0, move2 = 0;
        for (int i = 0; i < p0.length; i++) {
            double diff = zero.params()[i] - one.params()[i], move = one.params()[i] - p0[i];
            diff2 += diff * diff;
            move2 += move * move;
        }
        double rel = Math.sqrt(diff2 / move2);
        System.out.printf("ZeRO-1 over 2 ranks vs 1 rank, bf16 gradients: ‖Δp‖/‖move‖ %.3g%n", rel);
        assertThat(rel).isLessThanOrEqualTo(PARAM_REL);
        assertThat(Math.sqrt(move2)).as("the steps moved the parameters").isGreaterThan(1e-2);
    }

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void thePlanIsWhatEveryRankAllocates(int n) throws IOException {
        int B = 3, T = 5;
        MemoryPlan plan = MemoryPlan.of(Gpt2Fixtures.TINY, B, T, Recompute.NONE, 1, n, DType.BF16, DType.BF16);
        long psi = new ParameterLayout(Gpt2Fixtures.TINY).count();
        MemoryPlan ddp = MemoryPlan.of(Gpt2Fixtures.TINY, B, T, Recompute.NONE, 0, n, DType.BF16, DType.BF16);
        assertThat(plan.gradients()).as("whole 16-bit gradients on every rank").isEqualTo(ddp.gradients());
        assertThat(plan.optimizer()).isEqualTo(8 * ((psi + n - 1) / n));
        assertThat(plan.working()).isZero();
        TrainConfig cfg = config(B, 1).toBuilder().seq(T).build();
        List<long[]> seen;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(60))) {
            seen = g.run(comm -> {
                CountingMemory counted = new CountingMemory();
                try (Parallel p = new Parallel(1); TokenSource data = Gpt2LearnerRuns.source(small, cfg);
                     Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, Recompute.NONE, DType.BF16, data)
                             .backend(r -> counted.ops(new CpuOps(p))).build()) {
                    long live = counted.live.get();
                    assertThat(l.fit(1, null).get(0).trainLoss()).isFinite();
                    long stepPeak = counted.peak.get();
                    Gpt2LearnerRuns.checkpoints(l, comm.rank() == 0, Gpt2Fixtures.TINY, cfg, data)
                            .save(tmp.resolve("plan" + n));
                    return new long[] {live, counted.live.get(), stepPeak,
                        l.modelBytes() + l.optimizerStateBytes(), counted.peak.get()};
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
        }
        for (int r = 0; r < n; r++) {
            long[] a = seen.get(r);
            // the plan is the largest rank's: the others' chunks of the moments are an element shorter
            long shorter = 8 * ((psi + n - 1) / n - Chunks.length(psi, n, r));
            // the batch's buffers are the rank's host arena (RankStep's), not the backend's
            long own = plan.total() - plan.batch() - shorter, want = own + exchange(n);
            assertThat(a[3]).as("rank %d: the learner's own count", r).isEqualTo(own);
            assertThat(a[0]).as("rank %d: allocated before the first step", r).isEqualTo(want);
            assertThat(a[2]).as("rank %d: peak over a step", r).isEqualTo(want);
            assertThat(a[1]).as("rank %d: after a step and a checkpoint", r).isEqualTo(want);
            // not planned: the checkpoint gathers m and v whole into the backend's memory for a moment
            // (fit.RankCheckpoints.gatherShardedState: a scratch vector of Ψ floats per state buffer)
            assertThat(a[4] - want).as("rank %d: the checkpoint's peak over the plan", r).isEqualTo(2 * 4 * psi);
        }
        assertThat(BatchSizeFinder.trialStep(Gpt2Fixtures.TINY, ops, B, T, Recompute.NONE, DType.BF16, DType.BF16, 1,
                n)).as("the trial step").isEqualTo(plan.total());
    }

    @Test
    void zeroTwoAndThreeAreRefusedNamingBoth() {
        for (int stage = 2; stage <= 3; stage++) {
            final int s = stage;
            TrainConfig cfg = TrainConfig.builder().batch(2).seq(5).steps(1).zeroStage(stage)
                    .precision(Precision.FP32.withGradients(DType.BF16)).build();
            assertThatThrownBy(() -> {
                try (TokenSource data = Gpt2LearnerRuns.source(small, cfg)) {
                    Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, 2, data).build().close();
                }
            })
                    .hasMessage("gradientStorage(BF16) does not go with zero(" + stage + ") yet: drop one of them");
            assertThatThrownBy(() -> MemoryPlan.of(Gpt2Fixtures.TINY, 1, 5, Recompute.NONE, s, 2, DType.FP32,
                    DType.BF16)).hasMessage("16-bit gradients do not go with ZeRO stage " + stage + " yet");
        }
    }
}
