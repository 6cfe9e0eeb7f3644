package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.optim.AdamW;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ParameterServers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Asynchronous data parallelism on the Java API ({@link LearnerBuilder#asyncWorkers}, {@code fit.AsyncWorkers} over
 * {@code train.parallel.AsyncWorker}), each run over fresh {@link ParameterServers}: worker 0's losses, norms, rates
 * and final parameters (their CRC-32, {@link LearnerGpt2Test#crc}), the staleness fields of each of its steps, and the
 * CRC-32 of the checkpoint files; a checkpoint resumes to the bits of the uninterrupted run.
 *
 * <p>Goldens: the values the CLI's old trainer path (its asynchronous strategy over the same servers) produced for the
 * same runs, recorded at e32d1fe, where this test ran that trainer side by side with the learner and asserted equal
 * bits (and checkpoint files equal byte for byte) before each value was taken; one per vector width
 * ({@link WidthGoldens}).
 *
 * <p>Only what is deterministic is pinned. One worker (any staleness bound, any number of servers): a shard applies
 * each push as it comes (the only live worker), before it replies, so every pull is the newest version. Several
 * workers with staleness 0: a shard applies clock {@code c} only once every worker pushed it (the sum in worker
 * order, whatever the arrival order) and no worker can push {@code c+1} before it has pulled {@code c+1}, so every
 * pull is exactly version {@code c+1}. With a bound above 0 and several workers, which version a pull gets depends on
 * the threads' timing: {@link #severalWorkersWithABoundStayWithinIt} checks the bound instead.
 */
class LearnerAsyncTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static final long SEED = 3; // LearnerGpt2Test's initialisation, llm.c's from this seed
    private static final int SAVED_AT = 3;
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    /** Worker 0's steps, their staleness fields, and its final parameters' CRC-32. */
    private record Run(List<StepMetrics> steps, List<String> staleness, String params) {

        /** The CRC-32 of the steps from {@code from} on (and the parameters'), as {@link LearnerGpt2Test#crc}. */
        String crcFrom(int from) {
            String all = LearnerGpt2Test.crc(steps.subList(from, steps.size()), java.lang.foreign.MemorySegment
                    .ofArray(new byte[0]));
            return all.substring(0, 8) + " " + params;
        }
    }

    private static ParameterServers servers(int servers, int workers, int staleness) {
        return new ParameterServers(servers, workers, staleness, TIMEOUT, msg -> { });
    }

    private static String params(java.lang.foreign.MemorySegment p) {
        return LearnerGpt2Test.crc(List.of(), p).substring(9, 17);
    }

    /** {@link LearnerGpt2Test#builder}'s parts for {@code cfg}, {@code workers} workers of {@code ps}. */
    private static LearnerBuilder builder(TrainConfig cfg, int workers, ParameterServers ps, TokenSource data) {
        return LearnerGpt2Test.builder(cfg, workers, Recompute.NONE, DType.FP32, data)
                .asyncWorkers(ps, new ParameterLayout(Gpt2Fixtures.TINY), cfg);
    }

    /**
     * The same on a {@link Learner} with the CLI's checkpoints ({@link LearnerLlmcCheckpoints}), one step a fit, the
     * staleness read after each ({@link Learner#strategyJson}).
     */
    private static Run learner(TrainConfig cfg, int workers, ParameterServers ps, Path resume, Path save, int stop)
            throws IOException {
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, workers, ps, data).build()) {
            LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(),
                    cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
            ck.start(null, SEED);
            if (resume != null) {
                ck.resume(resume);
            }
            List<StepMetrics> steps = new ArrayList<>();
            List<String> staleness = new ArrayList<>();
            while (l.step() < stop) {
                steps.addAll(l.fit(1, m -> staleness.add(l.strategyJson())));
                if (save != null && l.step() == SAVED_AT) {
                    ck.save(save);
                }
            }
            return new Run(steps, staleness, params(l.network().params()));
        }
    }

    /** {@code run} over fresh servers of {@code servers} shards for {@code workers} workers, bound {@code s}. */
    private static Run fresh(int servers, int workers, int s, Function<ParameterServers, Run> run) {
        try (ParameterServers ps = servers(servers, workers, s)) {
            return run.apply(ps);
        }
    }

    private interface Side {
        Run run(TrainConfig cfg, int workers, ParameterServers ps, Path resume, Path save, int stop)
                throws IOException;
    }

    private static Function<ParameterServers, Run> side(Side side, TrainConfig cfg, int workers, Path resume,
                                                        Path save, int stop) {
        return ps -> {
            try {
                return side.run(cfg, workers, ps, resume, save, stop);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        };
    }

    @ParameterizedTest(name = "{0} workers, {1} servers, staleness {2}, {3}, K={4}, clip {5}")
    @CsvSource({
        "1, 1, 1, fp32, 2, 0.5, 8a0dec59 d35717ce, d913321c 2c6e2bd7",
        "1, 3, 0, bf16, 1, 0, 0f4dcf85 7bf3b94a, d0cfa3d6 88ad4310",
        "1, 2, 3, fp8, 2, 1, 01de96b5 ee776a1e, 77ebfa55 c2ff5434",
        "2, 1, 0, fp32, 1, 0.5, 85fdc48c c6f48a5e, 743cbe55 b1a48ab3",
        "3, 2, 0, bf16, 2, 0, 854ccbac 354a4a52, e6289973 7d0f985f",
        "2, 3, 0, fp8, 1, 0, 488697ee 4efe94a6, 825e3f16 db5887d4"})
    void theJavaApisWorkersTrainAsTheTrainersGoldens(int workers, int servers, int s, String p, int K, float clip,
                                                     String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = LearnerGpt2Test.cfg(p, K, clip, 0, 0);
        Run now = fresh(servers, workers, s, side(LearnerAsyncTest::learner, cfg, workers, null, null, cfg.steps()));
        assertThat(now.crcFrom(0)).as("worker 0's steps and parameters").isEqualTo(golden);
        assertThat(now.steps()).hasSize(cfg.steps());
        assertThat(now.staleness()).as("worker 0's staleness fields, step by step").hasSize(cfg.steps())
                .allSatisfy(j -> assertThat(j).isEqualTo(
                        ",\"staleness_min\":0,\"staleness_mean\":0.000,\"staleness_max\":0"));
    }

    /**
     * The Java API's checkpoint (the servers' shards gathered by worker 0 into llm.c's model file and the state file)
     * is the trainer's (the CRC-32 of each file, recorded when the two were compared byte for byte), and it resumes
     * (the shards given back, the clocks at the step) to the bits of the uninterrupted run. Golden: "the whole run |
     * the run from step 3 on | the model, state and pointer files' CRC-32".
     */
    @ParameterizedTest(name = "{0} workers, {1} servers, staleness {2}, {3}, K={4}")
    @CsvSource({
        "1, 2, 1, fp32, 2, 8a0dec59 d35717ce | 0dbdae14 d35717ce | 6e108aa5 d333b28d c30aef4a, "
            + "d913321c 2c6e2bd7 | 468a6880 2c6e2bd7 | c5ac527e 6e725799 c30aef4a",
        "2, 2, 0, bf16, 1, e016235c 62a33391 | 3975284d 62a33391 | 8926abd7 2d2e4688 c30aef4a, "
            + "3544d4eb ea3980ea | 44ee4323 ea3980ea | 83fd7f5e 1fc3f1f8 c30aef4a",
        "3, 1, 0, fp32, 1, 9e03fb68 e80dccfa | c4b882a5 e80dccfa | 9627f52f 7330fffe c30aef4a, "
            + "77c5123a b2b333d5 | 0b273914 b2b333d5 | 1b5a67e0 ad952b43 c30aef4a"})
    void checkpointsAreTheTrainersAndResumeOnTheSameBits(int workers, int servers, int s, String p, int K,
                                                         String golden512, String golden256, @TempDir Path dir)
            throws IOException {
        String[] golden = WidthGoldens.pick(golden512, golden256).split(" \\| ");
        TrainConfig cfg = LearnerGpt2Test.cfg(p, K, 0.5f, 0, 0);
        int steps = cfg.steps();
        Path byLearner = dir.resolve("learner");
        Run whole = fresh(servers, workers, s, side(LearnerAsyncTest::learner, cfg, workers, null, byLearner, steps));
        assertThat(whole.crcFrom(0)).as("the Java API's whole run").isEqualTo(golden[0]);
        assertThat(whole.crcFrom(SAVED_AT)).as("its steps from 3 on").isEqualTo(golden[1]);
        assertThat(fileCrcs(byLearner)).as("model, state and pointer files").isEqualTo(golden[2]);
        Run resumed = fresh(servers, workers, s, side(LearnerAsyncTest::learner, cfg, workers, byLearner, null,
                steps));
        assertThat(resumed.crcFrom(0)).as("the Java API from its checkpoint").isEqualTo(golden[1]);
    }

    /** The CRC-32 of the step-3 checkpoint's model, state and pointer files in {@code dir}. */
    private static String fileCrcs(Path dir) throws IOException {
        StringBuilder b = new StringBuilder();
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            java.util.zip.CRC32 c = new java.util.zip.CRC32();
            c.update(Files.readAllBytes(dir.resolve(f)));
            b.append(b.isEmpty() ? "" : " ").append(String.format("%08x", c.getValue()));
        }
        return b.toString();
    }

    /**
     * {@link Learner#save} and {@link Learner#resume} (the Java API's own checkpoint) hold the servers' state too: a
     * run saved at step 3 and resumed over fresh servers ends on the uninterrupted run's bits; with the moments lost
     * (fresh servers, no resume of them) it would not.
     */
    @ParameterizedTest(name = "{0} workers, {1} servers")
    @CsvSource({"1, 2", "2, 1"})
    void theLearnersOwnCheckpointResumesOnTheSameBits(int workers, int servers, @TempDir Path dir)
            throws IOException {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 2, 0.5f, 0, 0);
        Run whole = fresh(servers, workers, 0, side(LearnerAsyncTest::learner, cfg, workers, null, null,
                cfg.steps()));
        try (ParameterServers ps = servers(servers, workers, 0);
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, workers, ps, data).build()) {
            new LearnerLlmcCheckpoints(l, true, Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(), cfg.gradAccum(),
                    data.loaders(), CheckpointFiles.Retention.LATEST).start(null, SEED);
            l.fit(SAVED_AT, null);
            l.save(dir);
        }
        try (ParameterServers ps = servers(servers, workers, 0);
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, workers, ps, data).build()) {
            l.resume(dir);
            List<StepMetrics> rest = l.fit(cfg.steps() - SAVED_AT, null);
            assertThat(new Run(rest, List.of(), params(l.network().params())).crcFrom(0))
                    .isEqualTo(whole.crcFrom(SAVED_AT));
        }
    }

    /**
     * Workers of other processes, as {@code accel4j launch} runs them ({@code AsyncProcessRun}): each a
     * {@link Learner} of its own over a {@link LearnerBuilder#communicator} of the workers, reaching server ranks
     * that run {@link ParameterServers#serve} through its mailbox ({@link ParameterServers#remote}; here in-process
     * mailboxes and threads), trains as the in-process workers do, and worker 0's checkpoint is theirs byte for byte.
     */
    @ParameterizedTest(name = "{0} workers, {1} servers, staleness {2}")
    @CsvSource({"1, 2, 1", "2, 1, 0"})
    void workersOfOtherProcessesTrainAsInProcessOnes(int workers, int servers, int s, @TempDir Path dir)
            throws Exception {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 2, 0.5f, 0, 0);
        Path inProcess = dir.resolve("in-process"), remote = dir.resolve("remote");
        Run whole = fresh(servers, workers, s, side(LearnerAsyncTest::learner, cfg, workers, null, inProcess,
                cfg.steps()));
        io.accel4j.collectives.Mailbox[] boxes = io.accel4j.collectives.InProcessMailboxes.create(workers + servers);
        List<Thread> serving = new ArrayList<>();
        List<String> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int k = 0; k < servers; k++) {
            io.accel4j.collectives.Mailbox box = boxes[workers + k];
            Thread t = new Thread(() -> {
                String failed = ParameterServers.serve(box, servers, workers, s, TIMEOUT,
                        new ParameterLayout(Gpt2Fixtures.TINY), cfg, msg -> { });
                if (failed != null) {
                    failures.add(failed);
                }
            });
            t.start();
            serving.add(t);
        }
        List<Run> runs;
        try (InProcessGroup g = InProcessGroup.create(workers, TIMEOUT)) {
            runs = g.run(comm -> {
                try (ParameterServers ps = ParameterServers.remote(boxes[comm.rank()], servers, workers, s, TIMEOUT);
                     TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
                     Learner l = LearnerGpt2Test.builder(cfg, 1, Recompute.NONE, DType.FP32, data).communicator(comm)
                             .asyncWorkers(ps, new ParameterLayout(Gpt2Fixtures.TINY), cfg).build()) {
                    LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(l, comm.rank() == 0, Gpt2Fixtures.TINY,
                            cfg.batch(), cfg.seq(), cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
                    ck.start(null, SEED);
                    List<StepMetrics> steps = new ArrayList<>();
                    while (l.step() < cfg.steps()) {
                        steps.addAll(l.fit(1, null));
                        if (l.step() == SAVED_AT) {
                            ck.save(remote);
                        }
                    }
                    return new Run(steps, List.of(), params(l.network().params()));
                }
            });
        }
        for (Thread t : serving) {
            t.join(TIMEOUT.toMillis()); // every worker said it was done: the servers' loops end
            assertThat(t.isAlive()).as("a server still serving").isFalse();
        }
        assertThat(failures).isEmpty();
        assertThat(runs.get(0).crcFrom(0)).isEqualTo(whole.crcFrom(0));
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            assertThat(Files.readAllBytes(remote.resolve(f))).as(f).isEqualTo(Files.readAllBytes(inProcess.resolve(f)));
        }
    }

    /**
     * Several workers with staleness bound 1 (nondeterministic: see the class comment): every step's staleness
     * fields, and the servers' version stamps, stay within the bound; each worker's loss is its own and finite; the
     * learner's {@code metrics.jsonl} lines end with the same fields.
     */
    @Test
    void severalWorkersWithABoundStayWithinIt() throws IOException {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 1, 0f, 0, 0);
        Path out = tmp.resolve("bounded");
        try (ParameterServers ps = servers(2, 3, 1);
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, 3, ps, data).out(out).build()) {
            List<String> json = new ArrayList<>();
            List<StepMetrics> steps = l.fit(cfg.steps(), m -> json.add(l.strategyJson()));
            assertThat(steps).hasSize(cfg.steps()).allSatisfy(m -> assertThat(m.trainLoss()).isFinite());
            assertThat(json).hasSize(cfg.steps()).allSatisfy(j -> assertThat(j)
                    .matches(",\"staleness_min\":[01],\"staleness_mean\":[01]\\.\\d{3},\"staleness_max\":[01]"));
            assertThat(ps.maxStaleness()).as("from the version stamps").isBetween(0, 1);
            List<String> lines = Files.readAllLines(out.resolve("metrics.jsonl"));
            assertThat(lines).as("the learner's own metrics lines carry the same fields").hasSize(cfg.steps());
            for (int i = 0; i < lines.size(); i++) {
                assertThat(lines.get(i)).endsWith(json.get(i) + "}");
            }
        }
    }

    @ParameterizedTest(name = "{1}")
    @CsvSource(delimiter = '|', value = {
        "zero      | asyncWorkers does not go with zero(1): the servers shard the optimizer state already",
        "fp16      | asyncWorkers does not go with precision(FP16)'s loss scaling",
        "offload   | asyncWorkers does not go with offloadOptimizer(): the servers run the optimizer",
        "buckets   | asyncWorkers does not go with bucketMb: the workers average no gradients",
        "half      | asyncWorkers does not go with gradientStorage(BF16)",
        "workers   | asyncWorkers: the learner has 3 ranks, but the parameter servers wait for 2 workers",
        "optimizer | asyncWorkers: the parameter servers run Spec[beta1=0.9",
        "layout    | asyncWorkers: the model has"})
    void whatAsyncWorkersCannotRunWithIsRefusedNamingIt(String what, String message) {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 1, 0f, 0, 0);
        try (ParameterServers ps = servers(1, 2, 1);
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1)) {
            LearnerBuilder b = builder(cfg, 2, ps, data);
            LearnerBuilder wrong = switch (what) {
                case "zero" -> b.zero(1);
                case "fp16" -> b.precision(DType.FP16);
                case "offload" -> b.offloadOptimizer();
                case "buckets" -> b.bucketMb(1);
                case "half" -> b.precision(DType.BF16).gradientStorage(DType.BF16);
                case "workers" -> b.ranks(3);
                case "optimizer" -> b.optimizer(AdamW.of(0.5f));
                case "layout" -> b.asyncWorkers(ps, new ParameterLayout(new GptConfig(8, 11, 16, 1, 2, 8)), cfg);
                default -> throw new IllegalArgumentException(what);
            };
            assertThatThrownBy(wrong::build).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining(message);
        }
    }

    /** The CLI's AdamW ({@link TrainConfig#adamw}) is the one the servers run: the builder's check agrees. */
    @Test
    void theServersAdamWIsTheConfigs() {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 1, 0f, 0, 0);
        try (ParameterServers ps = servers(1, 1, 0);
             TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = builder(cfg, 1, ps, data).optimizer(cfg.adamw()).build()) {
            assertThat(l.describe()).startsWith("AdamW on 1 parameter server (1 asynchronous worker, staleness <= 0)");
            assertThat(l.optimizerStateBytes()).as("the servers hold the state").isZero();
            assertThat(l.stateNames()).containsExactly("m", "v");
        }
    }
}
