package io.accel4j.fit;

import io.accel4j.nn.Network;
import io.accel4j.train.precision.LossScaler;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

/**
 * The whole model in and out of the ranks a {@link Learner} holds (not a pipeline's): checkpoints ({@link #save},
 * {@link #resume}: {@link LearnerCheckpoint}'s files, every rank's ZeRO and tensor shards gathered whole, so a
 * checkpoint resumes under another layout), and the whole parameters and optimizer state to and from host memory.
 * Where the ranks are threads of this process the collectives run on one thread each ({@code forEachRank}). A
 * strategy whose ranks do not hold the state ({@link GradientSync#serverState}: asynchronous workers) is gathered
 * from and restored to where it lives instead.
 */
final class RankCheckpoints {

    private final List<RankStep> ranks;
    /** The run's rank of each rank held here. */
    private final int[] globalRank;
    /** Runs its argument for every rank held here (one thread each when several: collectives). */
    private final Consumer<IntConsumer> forEachRank;
    private final LearnerBuilder cfg;
    /** Ranks in the run: D·T (data-parallel replicas × tensor ranks). */
    private final int world;

    RankCheckpoints(List<RankStep> ranks, int[] globalRank, Consumer<IntConsumer> forEachRank, LearnerBuilder cfg,
                    int world) {
        this.ranks = ranks;
        this.world = world;
        this.globalRank = globalRank;
        this.forEachRank = forEachRank;
        this.cfg = cfg;
    }

    private void forEachRank(IntConsumer body) {
        forEachRank.accept(body);
    }

    /** {@link Learner#save}. */
    void save(Path dir) throws IOException {
        Network net = ranks.get(0).network();
        long count = net.table().count();
        io.accel4j.nn.ParameterTable table = io.accel4j.nn.TensorShards.of(net).whole(); // the whole model's
        long total = table.count();
        Map<String, MemorySegment> whole = new LinkedHashMap<>();
        try (Arena host = Arena.ofShared()) {
            for (String name : ranks.get(0).optimizer().state().keySet()) {
                whole.put(name, host.allocate(total * Float.BYTES, 64));
            }
            MemorySegment params = host.allocate(total * Float.BYTES, 64);
            forEachRank(rank -> { // collectives: every rank sends its ZeRO shards, then its tensor shards
                RankStep r = ranks.get(rank);
                io.accel4j.nn.TensorShards shards = io.accel4j.nn.TensorShards.of(r.network());
                boolean writer = globalRank[rank] == 0;
                GradientSync.ServerState held = r.sync().serverState();
                if (held != null) { // the parameters of record and the state are the servers': rank 0 fetches them
                    if (writer) {
                        held.gather(params, whole);
                    }
                    return;
                }
                try (io.accel4j.core.memory.DeviceArena scratch = r.network().memory().arena();
                     Arena mine = Arena.ofShared()) {
                    MemorySegment local = mine.allocate(count * Float.BYTES, 64);
                    MemorySegment all = writer ? null : mine.allocate(total * Float.BYTES, 64);
                    for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
                        MemorySegment dev = scratch.allocate(count * Float.BYTES);
                        r.sync().gatherShards(inNetworkMemory(r, e.getValue(), scratch), dev, count,
                                r.network().memory());
                        r.network().memory().copyToHost(dev, local);
                        shards.gather(local, writer ? whole.get(e.getKey()) : all);
                    }
                    r.sync().copyParameters(r.network(), local);
                    shards.gather(local, writer ? params : all);
                }
            });
            if (globalRank[0] != 0) {
                return; // it sent its shards; the run's rank 0 writes
            }
            RankStep r0 = ranks.get(0);
            LearnerCheckpoint.writeModel(dir, table, params);
            boolean resumable = ranks.stream().allMatch(r -> r.data() instanceof DataSource.Resumable);
            LossScaler sc = r0.scaler();
            LearnerCheckpoint.writeState(dir, new LearnerCheckpoint.State(r0.completed(),
                    sc.enabled() ? sc.scale() : 0f, sc.cleanSteps(), sc.skippedSteps(),
                    resumable ? DataPosition.after(r0.batchesRead(), cfg.B, world / cfg.tensorParallel) : null,
                    net.fp8() == null ? new byte[0] : net.fp8().encode()), whole);
        }
    }

    /**
     * {@code state} (a buffer of {@code r}'s optimizer) where the network's memory can reach it: itself, or for an
     * offloaded optimizer a copy in {@code scratch}.
     */
    private static MemorySegment inNetworkMemory(RankStep r, MemorySegment state,
                                                 io.accel4j.core.memory.DeviceArena scratch) {
        io.accel4j.core.memory.DeviceMemory mem = r.network().memory();
        if (r.optimizer().stateMemory() == mem) {
            return state;
        }
        MemorySegment dev = scratch.allocate(state.byteSize());
        mem.copyToDevice(state, dev); // the offloaded state is host memory
        return dev;
    }

    /** {@link Learner#resume}. */
    void resume(Path dir) throws IOException {
        Network net = ranks.get(0).network();
        long count = net.table().count();
        io.accel4j.nn.ParameterTable table = io.accel4j.nn.TensorShards.of(net).whole();
        long total = table.count();
        try (Arena host = Arena.ofShared()) {
            MemorySegment params = host.allocate(total * Float.BYTES, 64);
            LearnerCheckpoint.readModel(dir, table, params);
            Map<String, MemorySegment> whole = new LinkedHashMap<>();
            for (String name : ranks.get(0).optimizer().state().keySet()) {
                whole.put(name, host.allocate(total * Float.BYTES, 64));
            }
            LearnerCheckpoint.State st = LearnerCheckpoint.readState(dir, whole);
            boolean fp8 = net.fp8() != null;
            if (fp8 != (st.fp8().length > 0)) {
                throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE), "FP8 state",
                        (fp8 ? "is missing: the checkpoint is not of an FP8 run" : "is present: resume an FP8 "
                                + "checkpoint with fp8(recipe)"));
            }
            long skip;
            try {
                skip = st.batchesPerReplica(cfg.B, world / cfg.tensorParallel);
            } catch (IllegalArgumentException e) {
                throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE),
                        "data position", e.getMessage());
            }
            MemorySegment local = host.allocate(count * Float.BYTES, 64);
            for (RankStep r : ranks) {
                io.accel4j.nn.TensorShards shards = io.accel4j.nn.TensorShards.of(r.network());
                shards.extract(params, local);
                r.sync().resumeParameters(r.network(), local, st.step() - st.skippedSteps());
                r.optimizer().parametersReplaced();
                GradientSync.ServerState held = r.sync().serverState();
                if (held != null) { // the servers take the state back (not split over tensor ranks)
                    held.restore(params, whole, st.step());
                } else {
                    for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
                        shards.extract(whole.get(e.getKey()), local);
                        r.sync().scatterShard(local, e.getValue(), count, r.optimizer().stateMemory());
                    }
                }
                try {
                    r.scaler().restore(st.lossScale(), st.cleanSteps(), st.skippedSteps());
                    if (fp8) {
                        r.network().fp8().restore(st.fp8());
                    }
                } catch (IllegalArgumentException e) {
                    throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE),
                            "scaler/FP8 state", e.getMessage());
                }
                r.resumeAt(st.step(), skip);
            }
        }
    }

    /** {@link Learner#loadParameters}. */
    void loadParameters(MemorySegment whole) {
        long count = ranks.get(0).network().table().count();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(count * Float.BYTES, 64);
            for (RankStep r : ranks) {
                io.accel4j.nn.TensorShards.of(r.network()).extract(whole, local);
                r.sync().setParameters(r.network(), local);
                r.optimizer().parametersReplaced();
            }
        }
    }

    /** {@link Learner#gatherParameters}. */
    void gatherParameters(MemorySegment host) {
        Network net = ranks.get(0).network();
        long count = net.table().count(), total = io.accel4j.nn.TensorShards.of(net).whole().count();
        forEachRank(rank -> {
            RankStep r = ranks.get(rank);
            try (Arena mine = Arena.ofShared()) {
                MemorySegment local = mine.allocate(count * Float.BYTES, 64);
                r.sync().copyParameters(r.network(), local);
                io.accel4j.nn.TensorShards.of(r.network()).gather(local, globalRank[rank] == 0 ? host
                        : mine.allocate(total * Float.BYTES, 64));
            }
        });
    }

    /** {@link Learner#gatherState}. */
    void gatherState(MemorySegment params, Map<String, MemorySegment> state) {
        checkNotSharded();
        GradientSync.ServerState held = ranks.get(0).sync().serverState();
        if (held != null) { // the servers': the run's rank 0 fetches them, no collective
            held.gather(params, state);
            return;
        }
        if (cfg.zero > 0) { // every rank sends its shards
            gatherShardedState(params, state);
            return;
        }
        RankStep r = ranks.get(0);
        r.sync().copyParameters(r.network(), params); // the network's own (stage 0), or bf16's fp32 master
        for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
            r.optimizer().stateMemory().copyToHost(e.getValue(),
                    state.get(e.getKey()).asSlice(0, e.getValue().byteSize()));
        }
    }

    /** {@link #gatherState} under ZeRO: a collective of every rank, the run's rank 0 receiving. */
    private void gatherShardedState(MemorySegment params, Map<String, MemorySegment> state) {
        long count = ranks.get(0).network().table().count();
        forEachRank(rank -> {
            RankStep r = ranks.get(rank);
            boolean writer = globalRank[rank] == 0;
            try (io.accel4j.core.memory.DeviceArena scratch = r.network().memory().arena();
                 Arena mine = Arena.ofShared()) {
                for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
                    MemorySegment dev = scratch.allocate(count * Float.BYTES);
                    r.sync().gatherShards(inNetworkMemory(r, e.getValue(), scratch), dev, count,
                            r.network().memory());
                    if (writer) {
                        r.network().memory().copyToHost(dev, state.get(e.getKey()).asSlice(0, count * Float.BYTES));
                    }
                }
                r.sync().copyParameters(r.network(), writer ? params : mine.allocate(count * Float.BYTES, 64));
            }
        });
    }

    /** {@link Learner#restoreState}. */
    void restoreState(MemorySegment params, Map<String, MemorySegment> state, int step, float lossScale,
                      int cleanSteps, int skippedSteps) {
        checkNotSharded();
        long count = ranks.get(0).network().table().count();
        for (RankStep r : ranks) {
            GradientSync.ServerState held = r.sync().serverState();
            if (held != null) { // the network takes the parameters, the servers the state
                r.sync().setParameters(r.network(), params);
                r.optimizer().parametersReplaced();
                held.restore(params, state, step);
            } else if (cfg.zero > 0) { // this rank's shards of the whole
                r.sync().resumeParameters(r.network(), params, step - skippedSteps);
                r.optimizer().parametersReplaced();
                for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
                    r.sync().scatterShard(state.get(e.getKey()), e.getValue(), count, r.optimizer().stateMemory());
                }
            } else { // the network's own (stage 0), or bf16's fp32 master and the store rounded from it
                r.sync().resumeParameters(r.network(), params, step - skippedSteps);
                r.optimizer().parametersReplaced();
                for (Map.Entry<String, MemorySegment> e : r.optimizer().state().entrySet()) {
                    r.optimizer().stateMemory().copyToDevice(state.get(e.getKey()).asSlice(0,
                            e.getValue().byteSize()), e.getValue());
                }
            }
            r.scaler().restore(lossScale, cleanSteps, skippedSteps);
            r.resumeAt(step, (long) step * cfg.gradAccum);
        }
    }

    private void checkNotSharded() {
        if (cfg.zero > 0 && cfg.tensorParallel > 1) {
            throw new IllegalStateException("ZeRO-1 over tensor-parallel replicas shards the optimizer state twice: "
                    + "use save and resume");
        }
    }
}
