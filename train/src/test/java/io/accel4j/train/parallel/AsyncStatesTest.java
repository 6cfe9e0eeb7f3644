package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.Trainer;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
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
 * Asynchronous data parallelism ({@link ParameterServers}, {@link AsyncStates}) on in-process workers: staleness 0
 * trains like synchronous DDP, staleness 2 with a straggler still learns and never exceeds its bound (from the
 * servers' version stamps), a worker that stops is dropped and the others finish, a server that dies stops every
 * worker naming it.
 */
class AsyncStatesTest {

    private static final int STEPS = 6;
    /**
     * S = 0 vs DDP, parameters after {@link #STEPS} steps, absolute: the servers sum the W = 2 workers' gradients in
     * arrival order and scale by 1/2 (exact), DDP's ring adds the same two values then divides by 2 (exact): the
     * same bits per element, so the only differences are the kernels' (AdamW over the shard's ranges vs the whole
     * table's groups), none expected; 1e-6 allows fp32 reassociation should a kernel split differently, far below an
     * update (lr = 1e-2).
     */
    private static final double PARAM_TOL = 1e-6;
    private static final float LR = 1e-2f;
    /** TrainerTest's tiny model: maxT 8, V 11, padded V 16, 2 layers, 2 heads, C 8. */
    private static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);

    /** TrainerTest's tokens: mostly counting up, a random token one time in four. */
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
        return TrainConfig.builder().batch(2).seq(5).steps(steps).lr(LR).eps(1e-5f).gradClip(0)
                .weightDecay(0.01f).dataOrder(SampleOrder.Mode.SEQUENTIAL).bucketBytes(0).valEvery(0).valBatches(4).build();
    }

    private record Run(float[] params, double[] losses, double valBefore, double valAfter) {}

    /** {@code steps} steps of one worker; {@code delayMs} after each step (a straggler); {@code stopAt} stops early. */
    private static Run train(TrainConfig cfg, Communicator comm, ModelStates.Factory strategy, long delayMs,
                             int stopAt) throws Exception {
        try (Parallel pool = new Parallel(1);
             Gpt2 m = new Gpt2(TINY, new CpuOps(pool), cfg.batch(), TINY.maxT())) {
            m.initialise(1);
            try (Trainer t = new Trainer(m, cfg, trainFile, trainFile, comm, strategy)) {
                double valBefore = t.validate();
                double[] losses = new double[cfg.steps()];
                for (int s = 0; s < Math.min(stopAt, cfg.steps()); s++) {
                    StepMetrics sm = t.trainStep();
                    losses[s] = sm.trainLoss();
                    if (delayMs > 0) {
                        Thread.sleep(delayMs);
                    }
                }
                return new Run(floats(m.params()), losses, valBefore, t.validate());
            }
        }
    }

    private static List<Run> workers(int w, ParameterServers ps, TrainConfig cfg, int slow, long delayMs, int dead,
                                     int deadAt) {
        try (InProcessGroup g = InProcessGroup.create(w, Duration.ofSeconds(30))) {
            return g.run(comm -> train(cfg, comm, (c, model, cf, values) -> new AsyncStates(ps, c, model, cf),
                    comm.rank() == slow ? delayMs : 0, comm.rank() == dead ? deadAt : Integer.MAX_VALUE));
        }
    }

    @Test
    void stalenessZeroTrainsLikeSynchronousDataParallelism() {
        TrainConfig cfg = cfg(STEPS);
        List<Run> ddp;
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            ddp = g.run(comm -> train(cfg, comm, ModelStates::of, 0, Integer.MAX_VALUE));
        }
        List<Run> async;
        try (ParameterServers ps = new ParameterServers(2, 2, 0, Duration.ofSeconds(30), msg -> { })) {
            async = workers(2, ps, cfg, -1, 0, -1, 0);
            assertThat(ps.maxStaleness()).isZero();
        }
        for (int r = 0; r < 2; r++) {
            assertThat(async.get(r).losses()).as("worker %d's own losses", r).isNotEqualTo(new double[STEPS]);
            float[] a = async.get(r).params(), d = ddp.get(0).params();
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
     * from run to run: 0.47–0.6 of DDP's measured (0.47 on a clean CI clone); a quarter leaves room for that and
     * still fails a run that stops learning.
     */
    @Test
    void stalenessTwoWithAStragglerLearnsWithinItsBound() {
        int steps = 12;
        TrainConfig cfg = cfg(steps);
        List<Run> ddp;
        try (InProcessGroup g = InProcessGroup.create(3, Duration.ofSeconds(30))) {
            ddp = g.run(comm -> train(cfg, comm, ModelStates::of, 0, Integer.MAX_VALUE));
        }
        double ddpGain = ddp.get(0).valBefore() - ddp.get(0).valAfter();
        assertThat(ddpGain).as("DDP learns").isGreaterThan(0.05);
        try (ParameterServers ps = new ParameterServers(2, 3, 2, Duration.ofSeconds(30), msg -> { })) {
            List<Run> runs = workers(3, ps, cfg, 2, 100, -1, 0);
            assertThat(ps.maxStaleness()).as("from the version stamps").isBetween(1, 2);
            Run w0 = runs.get(0);
            assertThat(w0.valBefore()).isEqualTo(ddp.get(0).valBefore());
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
                        try (Parallel pool = new Parallel(1);
                             Gpt2 m = new Gpt2(TINY, new CpuOps(pool), 2, TINY.maxT())) {
                            m.initialise(1);
                            try (Trainer t = new Trainer(m, cfg, trainFile, null, comm,
                                    (c, model, cf, v) -> new AsyncStates(ps, c, model, cf))) {
                                t.trainStep();
                                if (comm.rank() == 0) {
                                    ps.kill(1);
                                }
                                for (int s = 1; s < STEPS; s++) {
                                    t.trainStep();
                                }
                            }
                        }
                        return null;
                    });
                }
            }).hasMessageContaining("parameter server 1 failed");
            assertThat((System.nanoTime() - t0) / 1e9).isLessThan(15);
        }
    }
}
