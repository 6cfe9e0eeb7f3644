package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.FlatWeights;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * ZeRO stages 2 and 3 ({@link ZeroOptimizer}; stage 1 is {@link SyncStates}'): AdamW's moments and the averaged
 * gradients sharded over the ranks, at stage 3 the parameters too. The model's sharded weights reduce-scatter each
 * unit's gradients as its backward ends, and {@link #reduceGradients} completes them. Checkpoints stay whole: rank 0
 * gathers the shards.
 */
final class ZeroOptimizerStates extends ModelStates {

    private final ZeroOptimizer zero;

    ZeroOptimizerStates(int stage, Communicator comm, Gpt2 model, TrainConfig cfg, int values) {
        super(checkRanks(stage, comm), model, values);
        ZeroOptimizer z;
        try {
            z = new ZeroOptimizer(stage, comm, model, cfg);
        } catch (RuntimeException | Error e) {
            super.close();
            throw e;
        }
        this.zero = z; // no buckets: the sharded weights reduce-scatter each unit as its backward ends
    }

    private static Communicator checkRanks(int stage, Communicator comm) {
        if (comm == null) {
            throw new IllegalArgumentException("ZeRO stage " + stage + " shards over the ranks: it needs a "
                    + "communicator of more than one rank (got 1)");
        }
        return comm;
    }


    @Override
    public void reduceGradients() {
        zero.reduceGradients();
    }

    @Override
    public boolean anyNonFinite() {
        return zero.hasNonFinite();
    }

    @Override
    public double sumOfSquares() {
        return zero.sumOfSquares();
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        zero.update(decay, t, gradScale);
    }

    @Override
    public void checkReplicas() {
        if (!zero.shardsParameters()) {
            ReplicaCheck.check(exchange, comm.rank(), memory, model.params(), count);
        }
    }

    @Override
    public boolean shardsParameters() {
        return zero.shardsParameters();
    }

    @Override
    public int zeroStage() {
        return zero.stage();
    }

    @Override
    public long stateBytes() {
        return zero.stateBytes();
    }

    @Override
    public long momentBytes() {
        return zero.momentBytes();
    }

    @Override
    public long workingBytes() {
        return zero.workingBytes();
    }

    @Override
    public ZeroMemory accounting() {
        return zero.memory();
    }

    @Override
    public void copyParameters(MemorySegment dst) {
        zero.gatherParameters(dst);
    }

    @Override
    public Saved gatherForCheckpoint(Arena arena) {
        boolean root = comm.rank() == 0;
        MemorySegment params = null;
        if (zero.shardsParameters()) { // the whole vector, only for the file
            params = root ? arena.allocate(count * Float.BYTES, 64) : null;
            zero.gatherParameters(params);
        }
        MemorySegment m = root ? arena.allocate(count * Float.BYTES, 64) : null;
        MemorySegment v = root ? arena.allocate(count * Float.BYTES, 64) : null;
        zero.gatherMoments(m, v);
        return root ? new Saved(m, v, params) : null;
    }

    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        return zero.readMoments(stateFile);
    }

    @Override
    public void setParameters(MemorySegment host) {
        zero.setParameters(host);
    }

    @Override
    public void gatherModel(boolean here) {
        if (!zero.shardsParameters()) {
            return;
        }
        FlatWeights whole = here ? new FlatWeights(model.layout(), model.memory()) : null;
        try {
            zero.gatherParameters(here ? whole.params() : null, true); // into the model's memory
        } catch (RuntimeException | Error e) {
            if (whole != null) {
                whole.close();
            }
            throw e;
        }
        if (here) {
            model.useWeights(whole);
        }
    }

    @Override
    public void close() {
        try {
            zero.close();
        } finally {
            super.close();
        }
    }
}
