package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.CollectiveException;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerProbe;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Data parallelism of the CLI's GPT-2 {@link Learner} ({@code fit.DataParallel}, {@code fit.BucketedDataParallel}),
 * each in-process rank a learner over its communicator as {@code accel4j train}'s ranks are: N ranks × batch B ≡ 1 rank
 * × batch N·B on the same tokens, the ranks' parameters stay bit-identical, and a rank that dies mid-step fails the
 * others with the collective's error.
 */
class DataParallelTest {

    /** Steps each equivalence run takes. */
    private static final int STEPS = 4;
    private static final float LR = 1e-2f;
    /**
     * AdamW's ε in the equivalence runs. The update {@code lr·m̂/(√v̂ + ε)} has a derivative in g of at most ~1/ε, so
     * with llm.c's ε = 1e-8 a gradient component that cancels to ~1e-9 may flip its update by ±lr over a rounding
     * difference; ε = 1e-5 bounds the sensitivity to lr/ε = 1e3 per unit of gradient error.
     */
    private static final float EPS = 1e-5f;
    /**
     * Parameters after {@link #STEPS} steps, absolute. The per-rank gradient uses 1/(B·T), the big batch 1/(N·B·T),
     * the AVG divides by N: for N = 2 these scales are exact, so the only difference is the order of the sums over
     * the N·B·T = 20..30 rows (N partial sums of B·T rows, then the ring's adds, vs one sum): |δg| ≲ n·2⁻²⁴·Σ|terms|,
     * a few 1e-6 relative; for N = 3 the /3 adds one fp32 rounding (6e-8 relative). Where |g| ≫ ε an AdamW step moves
     * a parameter by ~lr·m̂/√v̂, whose relative change is that of g: lr·1e-6 = 1e-8 per step; near the ε knee it is at
     * most lr/ε·|δg|. Over {@link #STEPS} steps, with the forward amplifying earlier differences, the measured worst
     * is 1.6e-7 (N = 2) and 2.4e-7 (N = 3); 2e-6 leaves ~10x, and stays far below what any real bug moves (an update
     * is ~lr = 1e-2: a wrong batch, a missing average or a missing rank moves parameters by 1e-3..1e-2).
     */
    private static final double PARAM_TOL = 2e-6;
    /** Train losses: the mean of N fp32-rounded per-rank means vs one double mean, ~1e-7 relative. */
    private static final double LOSS_REL = 1e-5;

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /** Buckets of 1 byte: every layer is its own bucket, started as soon as backward has produced it. */
    private static final long PER_LAYER = 1;

    private static TrainConfig cfg(int batch, long bucketBytes) {
        return TrainConfig.builder().batch(batch).seq(5).steps(STEPS).lr(LR).eps(EPS).gradClip(0.5f)
                .weightDecay(0.01f).dataOrder(SampleOrder.Mode.SEQUENTIAL).bucketBytes(bucketBytes).build();
    }

    private record RankResult(float[] params, double[] losses, double[] norms, int layerBuckets) {}

    /**
     * {@code cfg.steps()} steps on {@code ops} from GPT-2's initialisation from seed 1 ({@code comm} null: one rank);
     * returns this rank's final parameters and each step's loss and norm.
     */
    private static RankResult train(Ops ops, TrainConfig cfg, io.accel4j.collectives.Communicator comm) {
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
             Learner l = (comm == null ? Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, 1, data)
                     : Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, data)).backend(r -> ops).build()) {
            Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, cfg, data, 1);
            List<StepMetrics> steps = l.fit(cfg.steps(), null);
            return new RankResult(Gpt2LearnerRuns.rankParameters(l, comm == null ? 0 : comm.rank()),
                    Gpt2LearnerRuns.losses(steps), Gpt2LearnerRuns.norms(steps), LearnerProbe.buckets(l));
        }
    }

    private static List<RankResult> ranks(int n, int batch, long bucketBytes) {
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            return g.run(comm -> {
                try (Parallel pool = new Parallel(1)) {
                    return train(new CpuOps(pool), cfg(batch, bucketBytes), comm);
                }
            });
        }
    }

    private static RankResult single(int batch) {
        try (Parallel pool = new Parallel(2)) {
            return train(new CpuOps(pool), cfg(batch, 0), null);
        }
    }

    @Test
    void twoRanksAreOneRankWithTwiceTheBatch() throws IOException {
        List<RankResult> overlapped = equivalence(2, PER_LAYER);
        assertThat(overlapped.get(0).layerBuckets()).as("buckets started during backward")
                .isEqualTo(STEPS * Gpt2Fixtures.TINY.L());
        // with 2 ranks every element is a + b then /2 (exact), whichever rank adds: the buckets change no bit
        List<RankResult> whole = ranks(2, 2, 0);
        assertThat(whole.get(0).layerBuckets()).isZero();
        assertThat(overlapped.get(0).params()).containsExactly(whole.get(0).params());
    }

    @Test
    void threeRanksAreOneRankWithThreeTimesTheBatch() throws IOException {
        equivalence(3, 0);
    }

    private static List<RankResult> equivalence(int n, long bucketBytes) throws IOException {
        int B = 2;
        RankResult one = single(n * B);
        List<RankResult> dp = ranks(n, B, bucketBytes);
        for (int r = 1; r < n; r++) { // every rank holds the very same bits
            assertThat(dp.get(r).params()).as("rank %d's parameters vs rank 0's", r)
                    .containsExactly(dp.get(0).params());
            assertThat(dp.get(r).losses()).containsExactly(dp.get(0).losses());
            assertThat(dp.get(r).norms()).containsExactly(dp.get(0).norms());
        }
        RankResult d = dp.get(0);
        for (int s = 0; s < STEPS; s++) {
            assertThat(d.losses()[s]).as("train loss of step %d", s)
                    .isCloseTo(one.losses()[s], offset(LOSS_REL * one.losses()[s]));
            assertThat(d.norms()[s]).as("grad norm of step %d", s)
                    .isCloseTo(one.norms()[s], offset(LOSS_REL * one.norms()[s]));
        }
        float[] a = d.params(), b = one.params();
        double worst = 0;
        int at = -1;
        for (int i = 0; i < a.length; i++) {
            double diff = Math.abs(a[i] - b[i]);
            if (diff > worst) {
                worst = diff;
                at = i;
            }
        }
        assertThat(worst).as("largest |param difference| (at %d) of %d ranks × B=%d vs 1 rank × B=%d", at, n, B,
                n * B).isLessThanOrEqualTo(PARAM_TOL);
        // and the steps did move the parameters: the comparison is not vacuous
        try (Parallel pool = new Parallel(1); Gpt2 init = Gpt2Fixtures.model(new CpuOps(pool), B, 1)) {
            float[] p0 = Gpt2Fixtures.floats(init.params());
            double moved = 0;
            for (int i = 0; i < a.length; i++) {
                moved = Math.max(moved, Math.abs(a[i] - p0[i]));
            }
            assertThat(moved).as("largest parameter change over the run").isGreaterThan(100 * PARAM_TOL);
        }
        return dp;
    }

    @RepeatedTest(3) // the failure races with the buckets in flight: a few tries
    void aRankThatDiesMidStepFailsTheOthersWithTheCollectivesError() {
        Duration timeout = Duration.ofSeconds(5);
        var seen = new ConcurrentHashMap<Integer, Throwable>();
        long t0 = System.nanoTime();
        try (InProcessGroup g = InProcessGroup.create(2, timeout)) {
            assertThatThrownBy(() -> g.run(comm -> {
                try (Parallel pool = new Parallel(1)) {
                    Ops ops = new CpuOps(pool);
                    if (comm.rank() == 1) {
                        ops = dyingOps(ops, 3); // dies in the backward of its third step
                    }
                    return train(ops, cfg(2, PER_LAYER), comm); // buckets in flight when it dies
                } catch (RuntimeException e) {
                    seen.put(comm.rank(), e);
                    throw e;
                }
            })).isInstanceOf(IllegalStateException.class).hasMessageContaining("rank 1 died");
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertThat(seconds).as("the run ended within the timeout").isLessThan(timeout.toSeconds());
        assertThat(seen.get(0)).isInstanceOf(CollectiveException.class).hasMessageContaining("allReduce")
                .hasMessageContaining("rank 1");
        CollectiveException e = (CollectiveException) seen.get(0);
        assertThat(e.collective()).isEqualTo("allReduce");
        assertThat(e.culprits()).containsExactly(1);
    }

    /** {@code ops} whose matmul backward (plain or with the MLP's GELU fused) throws in the {@code n}-th step. */
    private static Ops dyingOps(Ops ops, int n) {
        AtomicInteger calls = new AtomicInteger();
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().startsWith("matmulBackward")
                            && calls.incrementAndGet() == n * Gpt2Fixtures.TINY.L() * 4) {
                        throw new IllegalStateException("rank 1 died");
                    }
                    try {
                        return method.invoke(ops, args);
                    } catch (InvocationTargetException ite) {
                        throw ite.getCause();
                    }
                });
    }
}
