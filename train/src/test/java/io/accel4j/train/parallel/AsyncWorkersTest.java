package io.accel4j.train.parallel;

import io.accel4j.train.Gpt2Fixtures;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.Gpt2Learners;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Asynchronous data parallelism ({@link ParameterServers}, each worker a GPT-2 {@link Learner} of its own over
 * {@link LearnerBuilder#asyncWorkers}, {@code fit.AsyncWorkers} over {@link AsyncWorker}) on in-process workers:
 * staleness 0 trains like synchronous DDP, staleness 2 with a straggler still learns and never exceeds its bound (from
 * the servers' version stamps), a worker that stops is dropped and the others finish, a server that dies stops every
 * worker naming it. (Bit-for-bit runs, checkpoints and the builder's refusals: {@code train.LearnerAsyncTest}.)
 */
class AsyncWorkersTest {

    private static final int STEPS = 6;
    /**
     * S = 0 vs DDP, parameters after {@link #STEPS} steps, absolute: the servers sum the W = 2 workers' gradients in
     * worker order and scale by 1/2 (exact), DDP's ring adds the same two values then divides by 2 (exact): the
     * same bits per element, so the only differences are the kernels' (AdamW over the shard's ranges vs the whole
     * table's groups), none expected; 1e-6 allows fp32 reassociation should a kernel split differently, far below an
     * update (lr = 1e-2).
     */
    private static final double PARAM_TOL = 1e-6;
    private static final float LR = 1e-2f;
    /** Gpt2Fixtures' tiny model: maxT 8, V 11, padded V 16, 2 layers, 2 heads, C 8. */
    private static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** the old trainer tests' tokens: mostly counting up, a random token one time in four. */
    private static TokenFile tokenFile(Path path, int n, Random r) throws IOException {
        int[] t = new int[n];
        for (int i = 1; i < n; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(TINY.V()) : (t[i - 1] + 1) % TINY.V();
        }
        TokenFile.write(path, t);
        return TokenFile.open(path);
    }

    private static float[] floats(MemorySegment s) {
        float[] a = new float[(int) (s.byteSize() / 4)];
        MemorySegment.copy(s, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, a, 0, a.length);
        return a;
    }

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    private static TrainConfig cfg(int steps) {
        return TrainConfig.builder().batch(2).seq(5).steps(steps).lr(LR).eps(1e-5f).gradClip(0).weightDecay(0.01f)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).bucketBytes(0).valEvery(0).valBatches(4).seed(1).build();
    }

    private record Run(float[] params, double[] losses, double valBefore, double valAfter) {}

    /** The learner's (rank 0's network's) mean loss over the train file's first {@code valBatches} batches. */
    private static double validate(Learner l, TrainConfig cfg) {
        try (TokenSource v = new TokenSource(TokenShards.of(trainFile), SampleOrder.Mode.SEQUENTIAL, 0, 1)) {
            return l.evaluate(v.open(0, 1, cfg.batch(), cfg.seq()), cfg.valBatches());
        }
    }

    /**
     * {@code steps} steps of the learner {@code b} makes; {@code delayMs} after each step (a straggler); {@code stopAt}
     * stops early (closing the learner: the worker says it is done).
     */
    private static Run train(TrainConfig cfg, LearnerBuilder b, long delayMs, int stopAt) throws Exception {
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = b.data(data).build()) {
            double valBefore = validate(l, cfg);
            double[] losses = new double[cfg.steps()];
            for (int s = 0; s < Math.min(stopAt, cfg.steps()); s++) {
                StepMetrics sm = l.fit(1, null).get(0);
                losses[s] = sm.trainLoss();
                if (delayMs > 0) {
                    Thread.sleep(delayMs);
                }
            }
            return new Run(floats(l.network().params()), losses, valBefore, validate(l, cfg));
        }
    }

    /** GPT-2 TINY as the CLI builds it ({@link Gpt2Learners}), one thread, {@code comm}'s rank. */
    private static LearnerBuilder worker(TrainConfig cfg, Communicator comm) {
        return Gpt2Learners.of(TINY, cfg).communicator(comm).threads(1);
    }

    /** Synchronous DDP: {@code w} ranks, each a learner over {@code comm}. */
    private static List<Run> ddp(int w, TrainConfig cfg) {
        try (InProcessGroup g = InProcessGroup.create(w, TIMEOUT)) {
            return g.run(comm -> train(cfg, worker(cfg, comm), 0, Integer.MAX_VALUE));
        }
    }

    private static List<Run> workers(int w, ParameterServers ps, TrainConfig cfg, int slow, long delayMs, int dead,
                                     int deadAt) {
        try (InProcessGroup g = InProcessGroup.create(w, TIMEOUT)) {
            return g.run(comm -> train(cfg, worker(cfg, comm).asyncWorkers(ps, new ParameterLayout(TINY), cfg),
                    comm.rank() == slow ? delayMs : 0, comm.rank() == dead ? deadAt : Integer.MAX_VALUE));
        }
    }

    @Test
    void stalenessZeroTrainsLikeSynchronousDataParallelism() {
        TrainConfig cfg = cfg(STEPS);
        List<Run> ddp = ddp(2, cfg);
        List<Run> async;
        try (ParameterServers ps = new ParameterServers(2, 2, 0, TIMEOUT, msg -> { })) {
            async = workers(2, ps, cfg, -1, 0, -1, 0);
            assertThat(ps.maxStaleness()).isZero();
        }
        for (int r = 0; r < 2; r++) {
            assertThat(async.get(r).losses()).as("worker %d's own losses", r).isNotEqualTo(new double[STEPS]);
            float[] a = async.get(r).params(), d = ddp.get(0).params();
            assertThat(a).hasSameSizeAs(d);
            double worst = 0;
            for (int i = 0; i < a.length; i++) {
                worst = Math.max(worst, Math.abs(a[i] - d[i]));
            }
            assertThat(worst).as("worker %d's parameters vs DDP's", r).isLessThanOrEqualTo(PARAM_TOL);
        }
    }

    /**
     * Staleness 2, a straggler (worker 2 sleeps 100 ms after each step): the bound holds by the version stamps, and
     * worker 0's validation loss (its own, possibly stale, parameters, on the first 4 batches) after 12 steps is
     * below its start by at least a quarter of what synchronous DDP gains in the same steps: stale gradients slow
     * learning, they must not stop it. How stale each pull is depends on the threads' timing, so the gain varies
     * from run to run (0.47–0.6 of DDP's, measured on the CLI trainer's path); a quarter leaves room for that and
     * still fails a run that stops learning.
     */
    @Test
    void stalenessTwoWithAStragglerLearnsWithinItsBound() {
        int steps = 12;
        TrainConfig cfg = cfg(steps);
        List<Run> ddp = ddp(3, cfg);
        double ddpGain = ddp.get(0).valBefore() - ddp.get(0).valAfter();
        assertThat(ddpGain).as("DDP learns").isGreaterThan(0.05);
        try (ParameterServers ps = new ParameterServers(2, 3, 2, TIMEOUT, msg -> { })) {
            List<Run> runs = workers(3, ps, cfg, 2, 100, -1, 0);
            assertThat(ps.maxStaleness()).as("from the version stamps").isBetween(1, 2);
            Run w0 = runs.get(0);
            assertThat(w0.valBefore()).isEqualTo(ddp.get(0).valBefore());
            System.out.printf("worker 0's validation gain %.4f, DDP's %.4f%n", w0.valBefore() - w0.valAfter(),
                    ddpGain);
            assertThat(w0.valBefore() - w0.valAfter()).as("worker 0's validation gain (DDP's %.4f)", ddpGain)
                    .isGreaterThan(ddpGain / 4);
        }
    }

    @Test
    void aWorkerThatStopsIsDroppedAndTheOthersFinish() {
        TrainConfig cfg = cfg(STEPS);
        ConcurrentLinkedQueue<String> said = new ConcurrentLinkedQueue<>();
        try (ParameterServers ps = new ParameterServers(1, 3, 1, Duration.ofMillis(1500), said::add)) {
            List<Run> runs = workers(3, ps, cfg, -1, 0, 1, 2);
            assertThat(runs).hasSize(3);
            assertThat(ps.alive(1)).isFalse();
            assertThat(String.join("\n", said)).contains("parameter server 0: dropped worker 1: no gradient for step 2");
            assertThat(ps.maxStaleness()).isLessThanOrEqualTo(1);
        }
    }

    @Test
    void aServerThatDiesStopsEveryWorkerNamingIt() {
        TrainConfig cfg = cfg(STEPS);
        try (ParameterServers ps = new ParameterServers(2, 2, 1, Duration.ofSeconds(20), msg -> { })) {
            long t0 = System.nanoTime();
            assertThatThrownBy(() -> {
                try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(20))) {
                    g.run(comm -> {
                        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(),
                                cfg.seed(), 1);
                             Learner l = worker(cfg, comm).asyncWorkers(ps, new ParameterLayout(TINY), cfg)
                                     .data(data).build()) {
                            l.fit(1, null);
                            if (comm.rank() == 0) {
                                ps.kill(1);
                            }
                            l.fit(STEPS - 1, null);
                        }
                        return null;
                    });
                }
            }).hasMessageContaining("parameter server 1 failed");
            assertThat((System.nanoTime() - t0) / 1e9).isLessThan(15);
        }
    }
}
