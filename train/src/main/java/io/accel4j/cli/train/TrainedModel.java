package io.accel4j.cli.train;

import io.accel4j.core.ops.Ops;
import io.accel4j.fit.Learner;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.sample.Sampler;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * What the report of a {@link LearnerRun} reads once its {@link Learner} is closed: fp16's loss scaler and, when it
 * samples, the trained weights (gathered to rank 0, llm.c's layout, host memory; with bf16 working weights those,
 * widened, as the model ran with them) and FP8's scaling state, from which
 * {@link #sampler} builds a GPT-2 of one sequence on the run's kernels. The learner's memory is freed first, so a GPU
 * never holds the trained model twice.
 */
final class TrainedModel implements AutoCloseable {

    private final LossScaler scaler;
    private final GptConfig config;
    private final Gpt2Options options;
    /** Owns {@link #weights}; null when the report does not sample (or on other ranks). */
    private final Arena arena;
    private final MemorySegment weights;
    private final byte[] fp8State;
    private Gpt2 model;

    private TrainedModel(LossScaler scaler, GptConfig config, Gpt2Options options, Arena arena,
                         MemorySegment weights, byte[] fp8State) {
        this.scaler = scaler;
        this.config = config;
        this.options = options;
        this.arena = arena;
        this.weights = weights;
        this.fp8State = fp8State;
    }

    /**
     * The end of {@code learner}'s run (a GPT-2 {@code c} built with {@code options}): with {@code weights}, a
     * collective that gathers the whole parameters to the run's rank 0 (every rank calls it; only {@code lead} keeps
     * them).
     */
    static TrainedModel of(Learner learner, GptConfig c, Gpt2Options options, boolean weights, boolean lead) {
        if (!weights) {
            return new TrainedModel(learner.lossScaler(), c, options, null, null, null);
        }
        Arena arena = Arena.ofShared(); // the ranks' threads may write it
        try {
            MemorySegment host = arena.allocate(learner.wholeTable().count() * Float.BYTES, 64);
            if (learner.network().parameterStorage() != io.accel4j.core.DType.FP32) {
                // bf16 working weights (one rank or DDP: every rank has them): the weights the model ran with,
                // widened, not the optimizer's fp32 master that gatherParameters gives
                learner.network().copyParamsToHost(host);
            } else {
                learner.gatherParameters(host);
            }
            if (!lead) {
                arena.close();
                return new TrainedModel(learner.lossScaler(), c, options, null, null, null);
            }
            return new TrainedModel(learner.lossScaler(), c, options, arena, host, learner.fp8State());
        } catch (RuntimeException | Error e) {
            if (arena.scope().isAlive()) {
                arena.close();
            }
            throw e;
        }
    }

    /** fp16's loss scaler at the end of the run (disabled otherwise). */
    LossScaler lossScaler() {
        return scaler;
    }

    /**
     * A greedy sampler of the trained model on {@code ops}, one sequence of at most {@code T} tokens (the training
     * length, as the trainer's context), or null when the weights were not kept. The model lives until {@link #close}.
     */
    Sampler sampler(Ops ops, int T) {
        if (weights == null) {
            return null;
        }
        if (model == null) {
            model = new Gpt2(config, ops, 1, T, options);
            model.copyParamsFromHost(weights);
            if (fp8State.length > 0) {
                model.fp8().restore(fp8State);
            }
        }
        return new Sampler(model);
    }

    @Override
    public void close() {
        if (model != null) {
            model.close();
        }
        if (arena != null) {
            arena.close();
        }
    }
}
