package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ShardedWeights;
import io.accel4j.train.parallel.TrialCommunicator;
import io.accel4j.train.parallel.UnitShards;
import io.accel4j.train.parallel.ZeroMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * {@code --find-batch-size}: the largest micro-batch whose {@link MemoryPlan} fits a memory budget, the accumulation
 * steps that make up a requested global batch with it, and a trial step that allocates exactly that plan and runs
 * one forward, backward and AdamW update in it.
 */
public final class BatchSizeFinder {

    /** The largest micro-batch searched. */
    public static final int MAX_BATCH = 1 << 16;

    private BatchSizeFinder() {
    }

    /**
     * A choice of micro-batch and accumulation.
     *
     * @param batch     B, sequences per micro-batch on each rank
     * @param gradAccum K, micro-batches per step
     * @param largest   the largest B that fits the budget (B is smaller when the global batch needs it)
     * @param plan      the memory plan of B
     */
    public record Choice(int batch, int gradAccum, int largest, MemoryPlan plan) {
    }

    /**
     * Chooses B and K for one of {@code ranks} ranks: B the largest batch of {@code T}-token sequences that fits
     * {@code budget} bytes; with a {@code globalBatch} (sequences per optimizer step over all ranks, null for
     * none) K is the fewest micro-batches that split {@code globalBatch / ranks} exactly into batches that fit, and
     * B that split; without, K is {@code gradAccum}.
     *
     * @throws IllegalArgumentException when not even one sequence fits, or the global batch does not split over the
     *                                  ranks
     */
    public static Choice choose(GptConfig config, int T, Recompute recompute, long budget, int ranks,
                                Integer globalBatch, int gradAccum) {
        return choose(config, T, recompute, 0, budget, ranks, globalBatch, gradAccum);
    }

    /** {@link #choose(GptConfig, int, Recompute, long, int, Integer, int)} for ranks sharding with ZeRO. */
    public static Choice choose(GptConfig config, int T, Recompute recompute, int zeroStage, long budget, int ranks,
                                Integer globalBatch, int gradAccum) {
        return choose(config, T, recompute, DType.FP32, zeroStage, budget, ranks, globalBatch, gradAccum);
    }

    /** {@link #choose(GptConfig, int, Recompute, int, long, int, Integer, int)} with activations stored in {@code storage}. */
    public static Choice choose(GptConfig config, int T, Recompute recompute, DType storage, int zeroStage,
                                long budget, int ranks, Integer globalBatch, int gradAccum) {
        return choose(config, T, recompute, storage, DType.FP32, zeroStage, budget, ranks, globalBatch, gradAccum);
    }

    /** {@link #choose(GptConfig, int, Recompute, DType, int, long, int, Integer, int)} with gradients in {@code gradients}. */
    public static Choice choose(GptConfig config, int T, Recompute recompute, DType storage, DType gradients,
                                int zeroStage, long budget, int ranks, Integer globalBatch, int gradAccum) {
        int largest = MemoryPlan.largestBatch(config, T, recompute, zeroStage, ranks, storage, gradients, budget,
                MAX_BATCH);
        if (largest == 0) {
            MemoryPlan one = MemoryPlan.of(config, 1, T, recompute, zeroStage, ranks, storage, gradients);
            throw new IllegalArgumentException("not even one sequence of " + T + " tokens fits the memory budget of "
                    + budget + " bytes: batch 1 needs " + one.total() + " (parameters, gradients and optimizer state "
                    + (one.modelStates() + one.working()) + " of them)");
        }
        if (globalBatch == null) {
            return new Choice(largest, gradAccum, largest,
                    MemoryPlan.of(config, largest, T, recompute, zeroStage, ranks, storage, gradients));
        }
        if (globalBatch < 1 || globalBatch % ranks != 0) {
            throw new IllegalArgumentException("the global batch must be a positive multiple of the " + ranks
                    + " ranks, got " + globalBatch);
        }
        int perRank = globalBatch / ranks;
        int k = (perRank + largest - 1) / largest;
        while (perRank % k != 0) { // ends at k = perRank (B = 1) at the latest
            k++;
        }
        int b = perRank / k;
        return new Choice(b, k, largest, MemoryPlan.of(config, b, T, recompute, zeroStage, ranks, storage, gradients));
    }

    /**
     * Allocates what {@code plan} counts for a {@code B × T} micro-batch — the model, AdamW's moments (of the largest
     * shard with ZeRO, and its gradient and parameter shards) and the batch buffers — and runs one forward, backward
     * and update on random tokens, as the first training step would (the update over the shard, without the
     * collectives).
     *
     * @return the bytes allocated, which the caller compares with the plan
     * @throws OutOfMemoryError when the machine cannot allocate what the plan says fits
     */
    public static long trialStep(GptConfig config, Ops ops, int B, int T, Recompute recompute) {
        return trialStep(config, ops, B, T, recompute, 0, 1);
    }

    /** {@link #trialStep(GptConfig, Ops, int, int, Recompute)} for a rank sharding with ZeRO. */
    public static long trialStep(GptConfig config, Ops ops, int B, int T, Recompute recompute, int zeroStage,
                                 int ranks) {
        return trialStep(config, ops, B, T, recompute, DType.FP32, zeroStage, ranks);
    }

    /** {@link #trialStep(GptConfig, Ops, int, int, Recompute, int, int)} with activations stored in {@code storage}. */
    public static long trialStep(GptConfig config, Ops ops, int B, int T, Recompute recompute, DType storage,
                                 int zeroStage, int ranks) {
        return trialStep(config, ops, B, T, recompute, storage, DType.FP32, zeroStage, ranks);
    }

    /**
     * {@link #trialStep(GptConfig, Ops, int, int, Recompute, DType, int, int)} with the gradients stored in
     * {@code gradients} (16-bit: stages 0 and 1; the update reads them in fp32 chunks, as the trainer's).
     */
    public static long trialStep(GptConfig config, Ops ops, int B, int T, Recompute recompute, DType storage,
                                 DType gradients, int zeroStage, int ranks) {
        if (gradients != DType.FP32 && zeroStage > 1) {
            throw new IllegalArgumentException("16-bit gradients do not go with ZeRO stage " + zeroStage + " yet");
        }
        ParameterLayout layout = new ParameterLayout(config);
        long count = layout.count();
        long shard = zeroStage == 0 ? count : zeroStage == 1 ? ZeroMemory.fp32(zeroStage, ranks, count).shard()
                : UnitShards.largestShard(layout, ranks);
        int largest = 0;
        for (int r = 0; zeroStage >= 2 && r < ranks; r++) {
            if (new UnitShards(layout, ranks, r).shardLength() == shard) {
                largest = r;
            }
        }
        // the communicator outlives the model, whose sharded weights may still have collectives queued on it
        try (TrialCommunicator alone = new TrialCommunicator(largest, ranks);
             Gpt2 model = new Gpt2(config, ops, B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                     .withActivationStorage(storage).withGradientStorage(gradients));
             Arena arena = Arena.ofShared()) {
            ShardedWeights sharded = null;
            if (zeroStage >= 2) { // the largest rank's shards and working buffers, as fit.UnitSharding holds them
                sharded = new ShardedWeights(layout, alone, ops, model.params(), zeroStage >= 3);
                model.useWeights(sharded);
            }
            MemorySegment m = arena.allocate(shard * Float.BYTES, 64), v = arena.allocate(shard * Float.BYTES, 64);
            TrialBatch batch = TrialBatch.random(arena, config, B, T);
            model.zeroGrad();
            model.forwardBackward(batch.inputs(), batch.targets(), B, T, 1f / ((long) B * T));
            if (sharded != null) {
                sharded.finishGradients();
            }
            // the step's last kernel; the model and its update are thrown away afterwards
            long shardBytes = shard * Float.BYTES;
            MemorySegment p = sharded != null && sharded.shardsParameters() ? sharded.paramShard() : model.params();
            AdamWConfig adam = new AdamWConfig(1e-4f, 0.9f, 0.999f, 1e-8f, 0f);
            if (gradients != DType.FP32) {
                model.halfGradients().chunks(0, shard, false, (o, f, n) -> ops.adamw(p.asSlice(o * Float.BYTES,
                        n * Float.BYTES), f, m.asSlice(o * Float.BYTES, n * Float.BYTES), v.asSlice(o * Float.BYTES,
                        n * Float.BYTES), o, n, adam, 1, 1f));
            } else {
                MemorySegment g = sharded != null ? sharded.gradShard() : model.grads();
                ops.adamw(p.asSlice(0, shardBytes), g.asSlice(0, shardBytes), m, v, 0, shard, adam, 1, 1f);
            }
            return model.totalBytes() + m.byteSize() + v.byteSize() + batch.bytes();
        }
    }
}
