package io.accel4j.cli.bench;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.Validation;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.Gpt2Learners;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.ParameterInit;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.collectives.Communicator;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.parallel.ParameterServers;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j bench async}: what asynchrony buys with a straggler, in one run. {@code W} in-process workers (one
 * kernel thread each) train the same model from the same seed on a learnable token stream for a fixed wall time,
 * worker 1 sleeping after each step for {@code --straggler-pct} of the step time measured first (synchronous DDP
 * without straggler, after a warm-up), that is, +50 % step time on that worker by default: synchronous DDP,
 * then asynchronous data parallelism ({@code --ps} servers) for each staleness bound. Each row: the steps each
 * worker took, the tokens/s of all workers together, and the validation loss worker 0's parameters reached (the last
 * ones it pulled, at most S updates behind the servers'). Tokens/s: every worker's tokens over the longest worker's
 * wall time.
 */
@Command(name = "async", sortOptions = false,
        description = {"Train for a fixed wall time with one straggling worker: synchronous DDP vs asynchronous "
                + "data parallelism at each --staleness; print steps, tokens/s and the validation loss reached."})
public final class AsyncBenchCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "tiny|bench|gpt2", defaultValue = "tiny",
            description = "Model preset (default: ${DEFAULT-VALUE}).")
    String model;
    @Option(names = "--workers", paramLabel = "W", defaultValue = "2", description = "Workers (default: "
            + "${DEFAULT-VALUE}).")
    int workers;
    @Option(names = "--ps", paramLabel = "K", defaultValue = "1", description = "Parameter servers of the "
            + "asynchronous runs (default: ${DEFAULT-VALUE}).")
    int servers;
    @Option(names = "--staleness", paramLabel = "S,...", split = ",", defaultValue = "1,4", description = "The "
            + "staleness bounds to run (default: ${DEFAULT-VALUE}).")
    int[] bounds;
    @Option(names = "--seconds", paramLabel = "T", defaultValue = "20", description = "Wall time of each run "
            + "(default: ${DEFAULT-VALUE}).")
    double seconds;
    @Option(names = "--straggler-pct", paramLabel = "P", defaultValue = "50", description = "Worker 1 sleeps P %% of "
            + "the measured step time after each step (default: ${DEFAULT-VALUE}).")
    int stragglerPct;
    @Option(names = "--batch", paramLabel = "B", defaultValue = "4", description = "Sequences per worker and step "
            + "(default: ${DEFAULT-VALUE}).")
    int batch;
    @Option(names = "--seq", paramLabel = "T", defaultValue = "64", description = "Tokens per sequence (default: "
            + "${DEFAULT-VALUE}).")
    int seq;
    @Option(names = "--warmup", paramLabel = "N", defaultValue = "10", description = "Untimed steps before the "
            + "step time is measured (the JIT) (default: ${DEFAULT-VALUE}).")
    int warmup;
    @Option(names = "--lr", paramLabel = "LR", defaultValue = "1e-3", description = "Constant learning rate "
            + "(default: ${DEFAULT-VALUE}).")
    float lr;

    /** One run's outcome: steps per worker, tokens/s of all workers, worker 0's validation loss. */
    private record Row(String name, int[] steps, double tokensPerS, double valLoss) {}

    @Override
    public Integer call() throws IOException {
        GptConfig c;
        try {
            c = GptConfig.preset(model);
        } catch (IllegalArgumentException e) {
            throw usage("--model: " + e.getMessage());
        }
        if (workers < 2 || servers < 1 || warmup < 0 || !(seconds > 0) || stragglerPct < 0 || batch < 1 || seq < 1
                || seq > c.maxT() || Arrays.stream(bounds).anyMatch(s -> s < 0)) {
            throw usage("--workers must be >= 2, --ps >= 1, --warmup >= 0, --seconds > 0, --straggler-pct >= 0, "
                    + "--batch >= 1, --seq in [1, " + c.maxT() + "] and every --staleness >= 0, got --workers "
                    + workers + ", --ps " + servers + ", --warmup " + warmup + ", --seconds " + seconds
                    + ", --straggler-pct " + stragglerPct + ", --batch " + batch + ", --seq " + seq + ", --staleness "
                    + Arrays.toString(bounds));
        }
        PrintWriter w = spec.commandLine().getOut();
        Path dir = Files.createTempDirectory("accel4j-bench-async");
        try (TokenFile train = tokens(dir.resolve("train.bin"), 1 << 18, c.V(), 1);
             TokenFile val = tokens(dir.resolve("val.bin"), 1 << 14, c.V(), 2)) {
            TrainConfig cfg = TrainConfig.builder().batch(batch).seq(seq).steps(1 << 20).lr(lr).warmup(0)
                    .schedule(TrainConfig.Schedule.CONSTANT).gradClip(0).valEvery(0).valBatches(4)
                    .dataOrder(SampleOrder.Mode.SEQUENTIAL).bucketBytes(0).build();
            double stepMs = calibrate(c, cfg, train);
            long delayMs = Math.round(stepMs * stragglerPct / 100.0);
            w.printf("GPT-2 %s (L=%d, NH=%d, C=%d), %d workers x %d x %d tokens, one kernel thread each; a step takes "
                    + "%.1f ms, worker 1 sleeps %d ms after each (+%d %%); %.0f s per run%n", model, c.L(), c.NH(),
                    c.C(), workers, batch, seq, stepMs, delayMs, stragglerPct, seconds);
            w.printf("%-16s %-22s %12s %12s%n", "run", "steps per worker", "tokens/s", "val loss");
            w.flush();
            List<Row> rows = new ArrayList<>();
            rows.add(print(w, run("sync (DDP)", c, cfg, train, val, delayMs, null)));
            for (int s : bounds) {
                try (ParameterServers ps = new ParameterServers(servers, workers, s, Duration.ofSeconds(60),
                        m -> { })) {
                    rows.add(print(w, run("async S=" + s, c, cfg, train, val, delayMs, ps)));
                }
            }
            for (Row r : rows.subList(1, rows.size())) {
                w.printf("%s vs sync: %.2fx tokens/s, val loss %+.4f%n", r.name(), r.tokensPerS()
                        / rows.get(0).tokensPerS(), r.valLoss() - rows.get(0).valLoss());
            }
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : files.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.deleteIfExists(dir);
        }
        return 0;
    }

    private static Row print(PrintWriter w, Row r) {
        w.printf("%-16s %-22s %12.0f %12.4f%n", r.name(), Arrays.toString(r.steps()), r.tokensPerS(), r.valLoss());
        w.flush();
        return r;
    }

    /** The median of 5 step times of synchronous DDP without a straggler (after the warm-up steps), in ms. */
    private double calibrate(GptConfig c, TrainConfig cfg, TokenFile train) {
        try (InProcessGroup g = InProcessGroup.create(workers, Duration.ofSeconds(60))) {
            List<double[]> ms = g.run(comm -> {
                try (Worker t = new Worker(c, cfg, train, comm, null)) {
                    t.learner.fit(warmup, null);
                    double[] d = t.learner.fit(5, null).stream().mapToDouble(StepMetrics::stepMs).sorted().toArray();
                    return d;
                }
            });
            return ms.get(0)[2];
        }
    }

    /**
     * The workers train until {@link #seconds} have passed: the first to see the time up fixes the last step (its
     * next), so DDP's ranks stop together and the asynchronous clocks all complete. {@code ps}: the asynchronous
     * runs' servers; null: synchronous DDP.
     */
    private Row run(String name, GptConfig c, TrainConfig cfg, TokenFile train, TokenFile val, long delayMs,
                    ParameterServers ps) {
        AtomicInteger last = new AtomicInteger(Integer.MAX_VALUE);
        long[] wall = new long[workers];
        double[] loss = new double[1];
        int[] steps = new int[workers];
        try (InProcessGroup g = InProcessGroup.create(workers, Duration.ofSeconds(60))) {
            g.run(comm -> {
                try (Worker t = new Worker(c, cfg, train, comm, ps)) {
                    long start = System.nanoTime(), limit = (long) (seconds * 1e9);
                    int s = 0;
                    while (s < last.get()) {
                        StepMetrics sm = t.learner.fit(1, null).get(0);
                        s++;
                        if (comm.rank() == 1 && delayMs > 0) {
                            Thread.sleep(delayMs);
                        }
                        if (System.nanoTime() - start >= limit) {
                            last.compareAndSet(Integer.MAX_VALUE, s + 1);
                        }
                        if (!Double.isFinite(sm.trainLoss())) {
                            throw new IllegalStateException(name + ": the loss is " + sm.trainLoss());
                        }
                    }
                    steps[comm.rank()] = s;
                    wall[comm.rank()] = System.nanoTime() - start;
                    if (comm.rank() == 0) {
                        try (Validation v = Validation.of(val, cfg)) {
                            loss[0] = v.loss(t.learner);
                        }
                    }
                }
                return null;
            });
        }
        long tokens = (long) Arrays.stream(steps).sum() * batch * seq;
        return new Row(name, steps, tokens / (Arrays.stream(wall).max().orElseThrow() / 1e9), loss[0]);
    }

    /**
     * One worker: a GPT-2 learner of rank {@code comm.rank()} on one kernel thread, from the parameters of seed 7,
     * reading its slice of {@code train}; with {@code ps} a worker of those servers, else a DDP rank.
     */
    private static final class Worker implements AutoCloseable {
        private final Parallel pool = new Parallel(1);
        private final TokenSource data;
        final Learner learner;

        Worker(GptConfig c, TrainConfig cfg, TokenFile train, Communicator comm, ParameterServers ps) {
            CpuOps ops = new CpuOps(pool);
            this.data = new TokenSource(TokenShards.of(train), cfg.dataOrder(), cfg.seed(), 1);
            LearnerBuilder b = Gpt2Learners.of(c, cfg).communicator(comm).backend(r -> ops).threads(1).data(data);
            if (ps != null) {
                b.asyncWorkers(ps, new ParameterLayout(c), cfg);
            }
            this.learner = b.build();
            try (Arena a = Arena.ofConfined()) {
                MemorySegment initial = a.allocate(c.parameterCount() * Float.BYTES, 64);
                ParameterInit.gpt2(new ParameterLayout(c), initial, 7);
                learner.loadParameters(initial);
            }
        }

        @Override
        public void close() {
            learner.close();
            data.close();
            pool.close();
        }
    }

    /** A learnable stream: counting up modulo V, a random token one time in four. */
    private static TokenFile tokens(Path path, int n, int V, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] t = new int[n];
        for (int i = 1; i < n; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(V) : (t[i - 1] + 1) % V;
        }
        try {
            TokenFile.write(path, t);
            return TokenFile.open(path);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
