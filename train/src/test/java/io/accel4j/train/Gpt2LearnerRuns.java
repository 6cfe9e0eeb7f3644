package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.OffloadPlan;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

/**
 * The CLI's GPT-2 rank on the Java API, for the tests that ran on the old trainer: a {@link Learner} built as
 * {@code cli.train.LearnerRun} builds it from a {@link TrainConfig} (llm.c's parameter order, the trainer's AdamW,
 * schedule, clipping, precision and loss scaling, 16-bit activations and gradients, ZeRO, buckets, offload), its
 * ranks in this process (one thread each, as the trainer's tests gave every rank a pool of one), over the token file
 * as a {@link TokenSource}; llm.c's checkpoints through {@link LearnerLlmcCheckpoints}.
 */
public final class Gpt2LearnerRuns {

    private Gpt2LearnerRuns() {
    }

    /**
     * {@code ranks} in-process ranks of GPT-2 {@code c} trained as {@code cfg} says, reading {@code data}; activations
     * stored in fp32 (the trainer's tests' {@code Gpt2Options.DEFAULT}; the CLI stores them as the precision says).
     */
    public static LearnerBuilder builder(GptConfig c, TrainConfig cfg, int ranks, TokenSource data) {
        return builder(c, cfg, ranks, Recompute.NONE, DType.FP32, data);
    }

    /**
     * {@link #builder(GptConfig, TrainConfig, int, TokenSource)} with {@code recompute} and the activations stored in
     * {@code storage}. As {@code LearnerRun}: ZeRO and buckets only over several ranks, buckets only for DDP and
     * ZeRO-1 over fp32 gradients; the offload as {@code ModelStates.offloaded()} is not in a {@link TrainConfig}: add
     * {@link LearnerBuilder#offloadOptimizer()}.
     */
    public static LearnerBuilder builder(GptConfig c, TrainConfig cfg, int ranks, Recompute recompute,
                                         DType storage, TokenSource data) {
        return common(c, cfg, ranks, recompute, storage, data).ranks(ranks).threads(ranks);
    }

    /**
     * This process's rank of {@code comm} (one thread), as {@link #builder(GptConfig, TrainConfig, int, TokenSource)}
     * builds each of its ranks: the trainer's tests' ranks, each with its own learner.
     */
    public static LearnerBuilder builder(GptConfig c, TrainConfig cfg, Communicator comm, TokenSource data) {
        return builder(c, cfg, comm, Recompute.NONE, DType.FP32, data);
    }

    /** {@link #builder(GptConfig, TrainConfig, Communicator, TokenSource)} with {@code recompute} and {@code storage}. */
    public static LearnerBuilder builder(GptConfig c, TrainConfig cfg, Communicator comm, Recompute recompute,
                                         DType storage, TokenSource data) {
        return common(c, cfg, comm.size(), recompute, storage, data).communicator(comm).threads(1);
    }

    private static LearnerBuilder common(GptConfig c, TrainConfig cfg, int ranks, Recompute recompute,
                                         DType storage, TokenSource data) {
        return Gpt2Learners.of(c, cfg).recompute(recompute).activationStorage(storage)
                .zero(ranks == 1 ? 0 : cfg.zeroStage()).bucketBytes(Gpt2Learners.bucketBytes(cfg, ranks)).data(data);
    }

    /** The token source the trainer read {@code file} through: {@code cfg}'s order and seed, one loader thread. */
    public static TokenSource source(TokenFile file, TrainConfig cfg) {
        return new TokenSource(TokenShards.of(file), cfg.dataOrder(), cfg.seed(), 1);
    }

    /** llm.c's checkpoints of {@code l} (this process holds rank 0: it writes), only the latest kept. */
    public static LearnerLlmcCheckpoints checkpoints(Learner l, GptConfig c, TrainConfig cfg, TokenSource data) {
        return checkpoints(l, true, c, cfg, data);
    }

    /** llm.c's checkpoints of {@code l}, this process writing when {@code lead} (the run's rank 0). */
    public static LearnerLlmcCheckpoints checkpoints(Learner l, boolean lead, GptConfig c, TrainConfig cfg,
                                                     TokenSource data) {
        return new LearnerLlmcCheckpoints(l, lead, c, cfg.batch(), cfg.seq(), cfg.gradAccum(), data.loaders(),
                CheckpointFiles.Retention.LATEST);
    }

    /** {@code l}'s parameters set to GPT-2's initialisation from {@code seed} (the trainer's {@code initialise}). */
    public static Learner initialised(Learner l, GptConfig c, TrainConfig cfg, TokenSource data, long seed) {
        try {
            checkpoints(l, c, cfg, data).start(null, seed);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return l;
    }

    /** The whole parameters (gathered: ZeRO-2/3's live in the units' shards), llm.c's order, as floats. */
    public static float[] parameters(Learner l) {
        try (Arena arena = Arena.ofShared()) { // the ranks' threads gather into it
            MemorySegment host = arena.allocate(l.wholeTable().count() * Float.BYTES, 64);
            l.gatherParameters(host);
            return host.toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    /**
     * This rank's whole parameters as floats: its replica when its network holds them whole (DDP, ZeRO-1), else
     * gathered from the shards, which only the run's rank 0 receives (null elsewhere; a collective of every rank).
     */
    public static float[] rankParameters(Learner l, int rank) {
        if (l.network().flat()) {
            try (Arena arena = Arena.ofConfined()) { // through the backend's memory: a device's too
                MemorySegment host = arena.allocate(l.network().table().fp32Bytes(), 64);
                l.network().copyParamsToHost(host);
                return host.toArray(ValueLayout.JAVA_FLOAT);
            }
        }
        float[] p = parameters(l);
        return rank == 0 ? p : null;
    }

    /** The steps' train losses. */
    public static double[] losses(List<StepMetrics> steps) {
        return steps.stream().mapToDouble(StepMetrics::trainLoss).toArray();
    }

    /** The steps' gradient norms. */
    public static double[] norms(List<StepMetrics> steps) {
        return steps.stream().mapToDouble(StepMetrics::gradNorm).toArray();
    }

    /**
     * One rank of GPT-2 {@code c} with its optimizer offloaded ({@code offloadOptimizer()}), trained one step on the
     * token file {@code tokens} over {@code cpu} wrapped in a {@link CountingMemory} as the device: its device bytes,
     * what the device allocated (live, then at its peak during the step) and AdamW's host moments are {@code plan}'s
     * (the batch's buffers are the rank's host arena, RankStep's, not the device's).
     */
    public static void assertOffloadMatchesPlan(GptConfig c, TrainConfig cfg, Path tokens, CpuOps cpu,
                                                OffloadPlan plan) throws IOException {
        long psi = new ParameterLayout(c).count();
        CountingMemory counted = new CountingMemory(); // host memory: the learner offloads onto a host pool of its own
        try (TokenFile train = TokenFile.open(tokens); TokenSource data = source(train, cfg);
             Learner l = builder(c, cfg, 1, data).backend(rank -> counted.ops(cpu)).offloadOptimizer().build()) {
            long device = plan.device().total() - plan.device().batch();
            assertThat(l.modelBytes()).as("the learner's device bytes").isEqualTo(device);
            assertThat(l.optimizerStateBytes()).as("AdamW's moments, on the host").isEqualTo(8 * psi);
            assertThat(counted.live.get()).as("allocated on the device").isEqualTo(device);
            assertThat(l.fit(1, null).get(0).trainLoss()).isFinite();
            assertThat(counted.peak.get()).as("the device's peak").isEqualTo(device);
        }
    }
}
