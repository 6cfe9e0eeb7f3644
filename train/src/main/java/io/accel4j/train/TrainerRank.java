package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.parallel.ModelStates;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One rank of a {@link Trainer} put together around its model (the CLI's counterpart of {@code fit.RankAssembly}):
 * the train loader over this rank's slice of every global batch, the validation (null without a val file or
 * batches), the model states the strategy makes, and the host batch the loaders fill and the model's forward copies
 * in. All or nothing: a failure half-way closes what was made. {@link #close} frees them all (the model stays open).
 */
final class TrainerRank implements AutoCloseable {

    final DataLoader train;
    /** Null without a val file. */
    final Validation val;
    final ModelStates states;
    /** Host memory: the batch's inputs and targets, {@code B·T} int32 each. */
    private final Arena arena;
    final MemorySegment inputs;
    final MemorySegment targets;

    private TrainerRank(DataLoader train, Validation val, ModelStates states, Arena arena, MemorySegment inputs,
                        MemorySegment targets) {
        this.train = train;
        this.val = val;
        this.states = states;
        this.arena = arena;
        this.inputs = inputs;
        this.targets = targets;
    }

    /**
     * Rank {@code rank} of {@code ranks} ({@code comm}: null for one) training {@code model} on {@code trainShards}
     * (read ahead by {@code loaderThreads}), validating on {@code valFile}, its states made by {@code strategy}.
     */
    static TrainerRank assemble(Gpt2 model, TrainConfig cfg, TokenShards trainShards, int loaderThreads,
                                TokenFile valFile, Communicator comm, int rank, int ranks,
                                ModelStates.Factory strategy) throws IOException {
        Arena arena = Arena.ofShared();
        DataLoader t = null;
        Validation vl = null;
        ModelStates st = null;
        try {
            t = new DataLoader(trainShards, cfg.batch(), cfg.seq(), rank, ranks, cfg.dataOrder(), cfg.seed(),
                    loaderThreads);
            vl = Validation.of(model, valFile, cfg.batch(), cfg.seq(), cfg.valBatches());
            // the exchange's room: ReplicaCheck's 8 pieces, updateFp8's amaxes
            st = strategy.create(comm, model, cfg, model.fp8() == null ? 0 : model.fp8().histories());
            long tokens = (long) cfg.batch() * cfg.seq() * Integer.BYTES;
            MemorySegment inputs = arena.allocate(tokens, 64);
            MemorySegment targets = arena.allocate(tokens, 64);
            return new TrainerRank(t, vl, st, arena, inputs, targets);
        } catch (RuntimeException | Error e) {
            if (st != null) {
                st.close();
            }
            if (t != null) {
                t.close();
            }
            if (vl != null) {
                vl.close();
            }
            arena.close();
            throw e;
        }
    }

    /** Bytes of the host batch ({@link io.accel4j.train.plan.MemoryPlan} counts them). */
    long batchBytes() {
        return inputs.byteSize() + targets.byteSize();
    }

    /** Stops the loaders, frees the model states and the batch. */
    @Override
    public void close() {
        states.close();
        train.close();
        if (val != null) {
            val.close();
        }
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
