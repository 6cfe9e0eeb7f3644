package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.fit.UnitSharding;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.FlatWeights;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * Stages 2 and 3 of the trainer, on the Java API's strategy and optimizer: the model's flat weights are replaced by
 * {@link ShardedWeights} ({@link ShardedUnits} over GPT-2's units: the embeddings, each layer, the final LayerNorm;
 * the parameters whole at stage 2, sharded at 3), and the ranks agree through {@link UnitSharding} — the
 * {@code fit.GradientSync} a {@code Learner} runs for ZeRO-3 —, which waits for the units' reduce-scatters, takes
 * the norm and overflow flag over the shards, and after the update all-gathers the updated runs (stage 2) or marks
 * the gathered units stale (stage 3). AdamW ({@code optim.AdamW}, an {@link Optimizer} owning its moments) updates
 * the rank's runs of the flat vector: the parameter shard at stage 3, the whole vector's runs at stage 2
 * ({@code OptimizerSpec.createOverWhole}). The numbers are those of plain DDP up to the roundings
 * {@link UnitSharding} names.
 *
 * <p>Checkpoints stay whole: rank 0 receives the moments' shards ({@link UnitSharding#gatherToRoot}) and, at stage 3,
 * the gathered parameters, and writes the plain {@link TrainState}; {@link #readMoments} reads this rank's pieces back,
 * so a checkpoint of any stage resumes at any other (and without ZeRO).
 */
final class ShardedStates extends ModelStates {

    private final int stage;
    private final ShardedWeights sharded;
    private final UnitSharding sync;
    private final Optimizer adamw;
    private final MemorySegment m;
    private final MemorySegment v;

    ShardedStates(int stage, Communicator comm, Gpt2 model, TrainConfig cfg, int values) {
        super(checkRanks(stage, comm), model, values);
        this.stage = stage;
        ShardedWeights w = null;
        UnitSharding s = null;
        Optimizer o = null;
        try {
            w = new ShardedWeights(model.layout(), comm, model.ops(), model.params(), stage >= 3);
            model.useWeights(w); // the model owns them from here on, and the flat buffers are freed
            s = new UnitSharding(comm, memory, w.units(), 0); // the exchange's room: the norm's N partials
            o = s.optimizer(adamw(cfg), model.network());
        } catch (RuntimeException | Error e) {
            if (s != null) {
                s.close();
            }
            if (w != null && model.weights() != w) {
                w.close();
            }
            super.close();
            throw e;
        }
        this.sharded = w;
        this.sync = s;
        this.adamw = o;
        this.m = o.state().get("m");
        this.v = o.state().get("v");
    }

    private static Communicator checkRanks(int stage, Communicator comm) {
        if (stage < 2 || stage > ZeroMemory.MAX_STAGE) {
            throw new IllegalArgumentException("these states are stages 2 and 3 (stages 0 and 1 are SyncStates'), "
                    + "got " + stage);
        }
        if (comm == null) {
            throw new IllegalArgumentException("ZeRO stage " + stage + " shards over the ranks: it needs a "
                    + "communicator of more than one rank (got 1)");
        }
        return comm;
    }

    @Override
    public void reduceGradients() {
        sync.reduce(null, count); // the sharded weights reduce-scatter each unit as its backward ends
    }

    @Override
    public boolean anyNonFinite() {
        return sync.anyNonFinite(model.ops(), null, count);
    }

    @Override
    public double sumOfSquares() {
        return sync.sumOfSquares(model.ops(), null, count);
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        adamw.step(t, decay.lr(), gradScale); // decay's other fields are the spec's
        sync.afterUpdate(sharded.wholeParams(), count);
    }

    @Override
    public void checkReplicas() {
        if (!shardsParameters()) {
            ReplicaCheck.check(exchange, comm.rank(), memory, model.params(), count);
        }
    }

    @Override
    public boolean shardsParameters() {
        return sharded.shardsParameters();
    }

    @Override
    public int zeroStage() {
        return stage;
    }

    @Override
    public long stateBytes() { // the moments and the norm's N float64 partials, which the strategy's exchange holds
        return momentBytes() + (long) ranks() * Double.BYTES;
    }

    @Override
    public long momentBytes() {
        return m.byteSize() + v.byteSize();
    }

    @Override
    public long workingBytes() {
        return sharded.workingBytes();
    }

    @Override
    public ZeroMemory accounting() {
        return ZeroMemory.fp32(stage, ranks(), count);
    }

    @Override
    public void copyParameters(MemorySegment dst) {
        sharded.gatherParameters(dst);
    }

    @Override
    public Saved gatherForCheckpoint(Arena arena) {
        boolean root = comm.rank() == 0;
        MemorySegment params = null;
        if (shardsParameters()) { // the whole vector, only for the file
            params = root ? arena.allocate(count * Float.BYTES, 64) : null;
            sharded.gatherParameters(params);
        }
        MemorySegment wholeM = root ? arena.allocate(count * Float.BYTES, 64) : null;
        MemorySegment wholeV = root ? arena.allocate(count * Float.BYTES, 64) : null;
        sync.gatherToRoot(m, wholeM);
        sync.gatherToRoot(v, wholeV);
        return root ? new Saved(wholeM, wholeV, params) : null;
    }

    /** Reads this rank's pieces of m and v from the whole-model state file {@code file}; returns its header. */
    @Override
    public TrainState.Header readMoments(Path file) throws IOException {
        TrainState.Header h = null;
        DeviceMemory mem = adamw.stateMemory();
        try (Arena staging = Arena.ofConfined()) {
            for (UnitShards.Piece p : sharded.units().shards().pieces()) {
                long at = p.shard() * Float.BYTES, bytes = p.length() * Float.BYTES;
                MemorySegment dm = m.asSlice(at, bytes), dv = v.asSlice(at, bytes);
                MemorySegment hm = mem.writableOnHost(dm, staging), hv = mem.writableOnHost(dv, staging);
                h = TrainState.read(file, model.config(), hm, hv, p.flat(), p.length());
                mem.writeBack(hm, dm);
                mem.writeBack(hv, dv);
            }
        }
        return h != null ? h : TrainState.read(file, model.config(), MemorySegment.NULL, MemorySegment.NULL, 0, 0);
    }

    @Override
    public void setParameters(MemorySegment host) {
        sharded.setParameters(host);
        adamw.parametersReplaced();
    }

    @Override
    public void gatherModel(boolean here) {
        if (!shardsParameters()) {
            return;
        }
        FlatWeights whole = here ? new FlatWeights(model.layout(), model.memory()) : null;
        try {
            sharded.gatherParameters(here ? whole.params() : null, true); // into the model's memory
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
            try {
                if (adamw != null) {
                    adamw.close();
                }
            } finally {
                sync.close();
            }
        } finally {
            super.close();
        }
    }
}
