package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterInit;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.UnaryOperator;

/**
 * The tiny GPT-2 runs the train module's tests share: the {@link #TINY} model, token files with a little structure
 * ({@link #tokenFile}), a short run's settings ({@link #base}), and a GPT-2 {@link Learner} put together from a
 * {@link TrainConfig} as {@code accel4j train} builds it ({@code cli.train.LearnerRun}: llm.c's parameter order,
 * AdamW, the schedule, clipping, the precision's operands, loss scaling, 16-bit storage and FP8), driven by
 * {@link Run}: llm.c's initialisation from a seed, the CLI's validation before the steps due, and its llm.c
 * checkpoints ({@link LearnerLlmcCheckpoints}).
 */
public final class Gpt2Fixtures {

    /** maxT 8, V 11 (padded to 16), 2 layers, 2 heads, C 8. */
    public static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    /**
     * The activations stored in fp32 under every precision (the CLI stores bf16's and fp16's in 16 bits,
     * {@link Precision#activationStorage}): the model the step-loop goldens and most of these tests were recorded on.
     */
    public static final UnaryOperator<LearnerBuilder> FP32_ACTIVATIONS =
            b -> b.activationStorage(io.accel4j.core.DType.FP32);

    private Gpt2Fixtures() {
    }

    /** Tokens with structure a model can learn a little of: mostly (t + 1) mod V, sometimes random. */
    public static TokenFile tokenFile(Path path, int n, Random r) throws IOException {
        int[] t = new int[n];
        for (int i = 1; i < n; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(TINY.V()) : (t[i - 1] + 1) % TINY.V();
        }
        TokenFile.write(path, t);
        return TokenFile.open(path);
    }

    /** 6 steps of 2 × 5 tokens at a learning rate of 0.01, the data in order. */
    public static TrainConfig.Builder base() {
        return TrainConfig.builder().batch(2).seq(5).steps(6).lr(1e-2f).dataOrder(SampleOrder.Mode.SEQUENTIAL);
    }

    /** The floats of {@code s} (host memory). */
    public static float[] floats(MemorySegment s) {
        float[] a = new float[(int) (s.byteSize() / 4)];
        MemorySegment.copy(s, F32, 0, a, 0, a.length);
        return a;
    }

    /** The {@link #TINY} model on {@code ops} for batches of up to {@code maxB}, initialised from {@code seed}. */
    public static Gpt2 model(Ops ops, int maxB, long seed) {
        return model(ops, maxB, seed, Precision.FP32);
    }

    /** The same, built for precision {@code p} (its matmul operands and FP8 recipe). */
    public static Gpt2 model(Ops ops, int maxB, long seed, Precision p) {
        Gpt2 m = new Gpt2(TINY, ops, maxB, TINY.maxT(), Gpt2Options.DEFAULT.withPrecision(p.operands(), p.fp8()));
        m.initialise(seed);
        return m;
    }

    /** GPT-2's initial parameters of {@code c} from {@code seed} ({@code Gpt2.initialise}'s), llm.c's layout. */
    public static MemorySegment initial(Arena arena, GptConfig c, long seed) {
        MemorySegment host = arena.allocate(c.parameterCount() * Float.BYTES, 64);
        ParameterInit.gpt2(new ParameterLayout(c), host, seed);
        return host;
    }

    /**
     * The GPT-2 learner of {@code c} that {@code accel4j train} builds for {@code cfg} on one process: llm.c's
     * parameter order, AdamW, the schedule, clipping, the precision (operands, loss scaling, activation and gradient
     * storage, FP8), ZeRO and the buckets as the CLI takes them ({@code cfg.bucketBytes()} for DDP and ZeRO-1 over
     * fp32 gradients, else 0), {@code ranks} in this process, one thread each; no recomputation. The caller may add
     * a backend and so on.
     */
    public static LearnerBuilder builder(TrainConfig cfg, GptConfig c, int ranks, TokenSource data) {
        return Gpt2Learners.of(c, cfg).zero(cfg.zeroStage()).bucketBytes(Gpt2Learners.bucketBytes(cfg, ranks))
                .ranks(ranks).threads(ranks).data(data);
    }

    /** The learner's whole parameters on the host (gathered), in {@code arena} (shared: the ranks write it). */
    public static MemorySegment parameters(Learner l, Arena arena) {
        MemorySegment host = arena.allocate(l.wholeTable().count() * Float.BYTES, 64);
        l.gatherParameters(host);
        return host;
    }

    /** The learner's whole parameters as floats. */
    public static float[] parameters(Learner l) {
        try (Arena a = Arena.ofShared()) {
            return floats(parameters(l, a));
        }
    }

    /**
     * A run of a GPT-2 learner over a token file as {@code accel4j train} drives it: the parameters from llm.c's
     * initialisation, each step validated first when due ({@code valEvery}, over the first {@code valBatches}
     * batches of the val file from its start), its llm.c checkpoints ({@link LearnerLlmcCheckpoints}, the latest
     * kept).
     */
    public static final class Run implements AutoCloseable {
        private final TrainConfig cfg;
        private final TokenSource data;
        private final Learner learner;
        private final LearnerLlmcCheckpoints checkpoints;
        private final Validation val;

        /**
         * One rank of {@link #TINY}, its activations stored in fp32 whatever the precision ({@link #FP32_ACTIVATIONS},
         * as the models these tests were written on).
         */
        public Run(TrainConfig cfg, TokenFile train, TokenFile valFile, long seed) {
            this(cfg, TINY, train, valFile, seed, 1, FP32_ACTIVATIONS);
        }

        /**
         * A run of {@code cfg} on {@code ranks} ranks of a model of {@code c} from llm.c's initialisation of
         * {@code seed}, over {@code train} ({@code valFile}: null, none), the learner {@link #builder} with
         * {@code more} applied (a backend, say).
         */
        public Run(TrainConfig cfg, GptConfig c, TokenFile train, TokenFile valFile, long seed, int ranks,
                   UnaryOperator<LearnerBuilder> more) {
            this(cfg, c, train, valFile, seed, ranks, null, more);
        }

        /**
         * This process's rank of {@code comm} in a run of {@code cfg} as {@code accel4j train} runs one (one learner
         * each, over the communicator; rank 0 writes the checkpoints), otherwise as
         * {@link #Run(TrainConfig, GptConfig, TokenFile, TokenFile, long, int, UnaryOperator)}.
         */
        public static Run rank(Communicator comm, TrainConfig cfg, GptConfig c, TokenFile train, TokenFile valFile,
                               long seed, UnaryOperator<LearnerBuilder> more) {
            return new Run(cfg, c, train, valFile, seed, comm.size(), comm, more);
        }

        private Run(TrainConfig cfg, GptConfig c, TokenFile train, TokenFile valFile, long seed, int ranks,
                    Communicator comm, UnaryOperator<LearnerBuilder> more) {
            this.cfg = cfg;
            this.data = new TokenSource(TokenShards.of(train), cfg.dataOrder(), cfg.seed(), 1);
            Learner l = null;
            Validation v = null;
            try {
                LearnerBuilder b = builder(cfg, c, ranks, data);
                if (comm != null) {
                    b.ranks(1).threads(1).communicator(comm);
                }
                l = more.apply(b).build();
                checkpoints = new LearnerLlmcCheckpoints(l, comm == null || comm.rank() == 0, c, cfg.batch(),
                        cfg.seq(), cfg.gradAccum(), data.loaders(), CheckpointFiles.Retention.LATEST);
                checkpoints.start(null, seed);
                v = Validation.of(valFile, cfg);
            } catch (IOException | RuntimeException e) {
                if (l != null) {
                    l.close();
                }
                data.close();
                throw e instanceof IOException io ? new java.io.UncheckedIOException(io) : (RuntimeException) e;
            }
            this.learner = l;
            this.val = v;
        }

        public Learner learner() {
            return learner;
        }

        public int step() {
            return learner.step();
        }

        public boolean done() {
            return learner.step() >= cfg.steps();
        }

        /** The next step, validated first when due (its val loss in the metrics; NaN otherwise). */
        public StepMetrics trainStep() {
            int s = learner.step();
            double v = val != null && cfg.valEvery() > 0 && s % cfg.valEvery() == 0 ? validate() : Double.NaN;
            return learner.fit(1, null).get(0).withValLoss(v);
        }

        /** The steps to the last. */
        public List<StepMetrics> toEnd() {
            List<StepMetrics> steps = new ArrayList<>();
            while (!done()) {
                steps.add(trainStep());
            }
            return steps;
        }

        /** The mean loss over the first val batches (NaN without a val file). */
        public double validate() {
            return val == null ? Double.NaN : val.loss(learner);
        }

        /** The checkpoint of this step into {@code dir}; its model file. */
        public Path save(Path dir) throws IOException {
            return checkpoints.save(dir);
        }

        /** Continues from the latest checkpoint in {@code dir}; its step. */
        public int resume(Path dir) throws IOException {
            return checkpoints.resume(dir);
        }

        /** The whole parameters as floats (on the run's rank 0; a collective of every rank). */
        public float[] parameters() {
            return Gpt2Fixtures.parameters(learner);
        }

        /**
         * This rank's own parameters (its network's buffer, read through its memory): a data-parallel replica's
         * whole copy, bit for bit every other replica's (under ZeRO-3: this rank's shards).
         */
        public float[] replica() {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment host = a.allocate(learner.network().parameterBytes());
                learner.network().copyParamsToHost(host);
                return floats(host);
            }
        }

        @Override
        public void close() {
            try {
                learner.close();
            } finally {
                try {
                    if (val != null) {
                        val.close();
                    }
                } finally {
                    data.close();
                }
            }
        }
    }
}
