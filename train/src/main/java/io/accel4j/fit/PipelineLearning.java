package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.pipeline.Partition;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.Schedule;
import io.accel4j.pipeline.SequentialStages;
import io.accel4j.pipeline.StagedModel;
import io.accel4j.nn.Network;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.StageNetwork;
import io.accel4j.pipeline.StageCheckpoint;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.precision.LossScaler;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A {@link Learner}'s ranks when it trains with pipeline parallelism ({@link LearnerBuilder#pipeline}): the model cut
 * into P stages balanced by parameters ({@link Partition}, printed), one {@link PipelineRank} per stage — all P in this
 * process over an in-process group, or this process's one over the builder's communicator (the pipeline group) — each
 * reading the data as data-parallel rank 0 of 1 (the first stage uses the inputs, the last the targets).
 */
final class PipelineLearning implements AutoCloseable {

    /** The stages and micro-batches of a pipeline and its schedule. */
    record Layout(int stages, int micro, Schedule schedule, StagedModel model) {
        Layout {
            Objects.requireNonNull(schedule, "schedule");
            if (stages < 1) {
                throw new IllegalArgumentException("pipeline stages must be >= 1, got " + stages);
            }
            schedule.check(stages, micro);
        }
    }

    private final Layout layout;
    private final InProcessGroup group;
    private final List<PipelineRank> ranks;
    private final List<AutoCloseable> owned = new ArrayList<>();
    private final Partition split;
    private final StagedModel model;
    /** The pipeline group when this process is one stage of it, null when every stage is held here. */
    private final Communicator comm;

    private final LearnerBuilder cfg;
    /** D: the data-parallel replicas of the pipeline (1: the pipeline alone). */
    private final int replicas;
    /** T: the tensor ranks each stage is split over (1: not split). */
    private final int tensor;
    /** Each held rank's grid (its pipeline and replica groups) when there are several replicas; else empty. */
    private final List<io.accel4j.grid.ProcessGrid> grids;

    PipelineLearning(LearnerBuilder b) {
        this.cfg = b;
        this.layout = b.pipeline;
        int P = layout.stages(), T = b.tensorParallel;
        int world = b.comm != null ? b.comm.size() : b.ranks == 1 ? P * T : b.ranks;
        if (world % (P * T) != 0) {
            throw new IllegalArgumentException("pipeline(" + P + " stages)" + (T > 1 ? " × tensorParallel(" + T + ")"
                    : "") + " over " + world + " ranks: the ranks are D·" + (T > 1 ? "T·" : "") + "P (data-parallel "
                    + "replicas × " + (T > 1 ? "tensor ranks × " : "") + "stages), so " + (T > 1 ? "T·P = " + P * T
                    : "P") + " must divide them");
        }
        if (b.fp8 != null || b.zero > 1) {
            throw new IllegalArgumentException("pipeline parallelism does not combine with "
                    + (b.fp8 != null ? "FP8" : "ZeRO-" + b.zero + " (ZeRO-1 it does)") + " yet");
        }
        this.tensor = T;
        this.replicas = world / (P * T);
        if (b.zero > 0 && replicas < 2) {
            throw new IllegalArgumentException("ZeRO-1 shards each stage's optimizer state over the pipeline's "
                    + "data-parallel replicas, but " + world + " ranks of " + P + " stages" + (T > 1 ? " × " + T
                    + " tensor ranks" : "") + " make one: ask for ranks(" + 2 * P * T + ") or more");
        }
        this.model = layout.model() != null ? layout.model()
                : new SequentialStages(b.model, b.tokens > 0 ? 1 : b.features, b.B, b.T);
        this.split = Partition.balanced(model.parameters(), P);
        if (b.progress != null && (b.comm == null || b.comm.rank() == 0)) {
            b.progress.println("pipeline: " + P + " stages" + (T > 1 ? " × " + T + " tensor ranks" : "")
                    + (replicas > 1 ? " × " + replicas + " data-parallel "
                    + "replicas" : "") + ", " + layout.micro() + " micro-batches, " + layout.schedule().name()
                    + " (bubble (P-1)/(M+P-1) = " + String.format(java.util.Locale.ROOT, "%.3f",
                    io.accel4j.pipeline.Timeline.bubbleFormula(P, layout.micro())) + ")"
                    + (b.storage != io.accel4j.core.DType.FP32 ? ", saved activations in " + b.storage : ""));
            for (String line : split.describe(model::layerName, "parameters")) {
                b.progress.println("  " + line);
            }
            b.progress.flush();
        }
        PipelineRank.Options o = new PipelineRank.Options(b.B, b.T, layout.micro(), b.tokens, b.classes, b.precision,
                b.recompute, b.optimizer, b.schedule, b.gradClip, b.seed, b.storage);
        if (b.progress != null && (b.comm == null || b.comm.rank() == 0)) { // planned before anything is allocated
            b.progress.println("memory per rank (tensor rank 0, replica 0 of each stage):");
            for (int st = 0; st < P; st++) {
                io.accel4j.pipeline.StagePlan.of(model, split, layout.schedule(), o, st, T, 0, replicas, b.zero)
                        .print(b.progress);
            }
            b.progress.flush();
        }
        int held = b.comm != null ? 1 : world;
        int perRank = Math.max(1, b.threads / held);
        this.group = b.comm == null ? InProcessGroup.create(world, b.collectiveTimeout) : null;
        io.accel4j.grid.GridLayout grid = io.accel4j.grid.GridLayout.of(world, P, T);
        List<PipelineRank> built = Collections.synchronizedList(new ArrayList<>(Collections.nCopies(held, null)));
        List<io.accel4j.grid.ProcessGrid> grids = Collections.synchronizedList(new ArrayList<>(
                Collections.nCopies(held, null)));
        try {
            List<Ops> ops = new ArrayList<>();
            for (int i = 0; i < held; i++) {
                int r = b.comm != null ? b.comm.rank() : i;
                if (b.backend != null) {
                    ops.add(Objects.requireNonNull(b.backend.apply(r), "the backend of rank " + r));
                } else {
                    Parallel pool = new Parallel(perRank);
                    owned.add(pool);
                    ops.add(new CpuOps(pool));
                }
            }
            onEveryRank(b.comm, world0 -> {
                int i = b.comm != null ? 0 : world0.rank();
                // one replica of P ranks: the world is the pipeline group itself; else split into the grid's groups
                io.accel4j.grid.ProcessGrid g = world == P ? null : io.accel4j.grid.ProcessGrid.of(world0, grid);
                grids.set(i, g);
                Communicator stages = g == null ? world0 : g.pipeline();
                int dp = g == null ? 0 : g.coordinates().dp();
                PipelineRank rank = new PipelineRank(model, split, layout.schedule(), stages,
                        g == null ? null : g.tensor(), ops.get(i), b.data.open(dp, replicas, b.B, b.T), o);
                if (g != null) {
                    rank.replicatedOver(g.data(), b.zero);
                }
                built.set(i, rank);
            });
        } catch (RuntimeException | Error e) {
            for (PipelineRank r : built) {
                if (r != null) {
                    r.close();
                }
            }
            for (io.accel4j.grid.ProcessGrid g : grids) {
                if (g != null) {
                    g.close();
                }
            }
            closeRest();
            throw e;
        }
        this.ranks = List.copyOf(built);
        this.grids = new ArrayList<>(grids); // null entries for one replica
        this.comm = b.comm;
    }

    private void onEveryRank(Communicator given, Consumer<Communicator> body) {
        if (given != null) {
            body.accept(given);
        } else {
            group.runAgain(c -> {
                body.accept(c);
                return null;
            });
        }
    }

    /** The stages held here (all P in process, or this process's one). */
    List<PipelineRank> ranks() {
        return ranks;
    }

    Partition split() {
        return split;
    }

    StagedModel model() {
        return model;
    }

    Layout layout() {
        return layout;
    }

    /** Whether the run's stage 0 is held here (it reports and writes). */
    boolean lead() {
        return comm == null || comm.rank() == 0;
    }

    /** Runs {@code steps} steps on every stage, telling {@code report} stage 0's metrics (every stage has the same). */
    void fit(int steps, Consumer<StepMetrics> report) {
        onEveryRank(comm, c -> {
            PipelineRank r = ranks.get(comm != null ? 0 : c.rank());
            for (int s = 0; s < steps; s++) {
                StepMetrics m = r.step();
                if (c.rank() == 0) {
                    report.accept(m);
                }
            }
        });
    }

    /**
     * Runs {@code body} on every rank of the first replica held here (its stages and their tensor ranks: one thread
     * each in process); the other replicas, which hold the same values, do nothing.
     */
    void forEachStage(Consumer<PipelineRank> body) {
        onEveryRank(comm, c -> {
            int i = comm != null ? 0 : c.rank();
            io.accel4j.grid.ProcessGrid g = grids.get(i);
            if (g == null || g.coordinates().dp() == 0) {
                body.accept(ranks.get(i));
            }
        });
    }

    /**
     * Writes the checkpoint of the whole model ({@link Learner#save}'s files, as one rank with M micro-batches of
     * accumulation would): every stage's parameters and optimizer state gathered by name onto stage 0, which writes.
     */
    void save(java.nio.file.Path dir) throws java.io.IOException {
        ParameterTable whole = wholeTable();
        try (Arena a = Arena.ofShared()) {
            MemorySegment params = a.allocate(whole.fp32Bytes(), 64);
            Map<String, MemorySegment> w = new LinkedHashMap<>();
            for (String k : ranks.get(0).optimizer().state().keySet()) {
                w.put(k, a.allocate(whole.fp32Bytes(), 64));
            }
            gatherState(params, w);
            if (!lead()) {
                return;
            }
            PipelineRank r0 = ranks.get(0);
            LearnerCheckpoint.writeModel(dir, whole, params);
            LossScaler sc = r0.scaler();
            boolean resumable = ranks.stream().allMatch(PipelineRank::resumable);
            LearnerCheckpoint.writeState(dir, new LearnerCheckpoint.State(r0.completed(),
                    sc.enabled() ? sc.scale() : 0f, sc.cleanSteps(), sc.skippedSteps(),
                    resumable ? DataPosition.after(r0.batchesRead(), cfg.B, replicas) : null, new byte[0]), w);
        }
    }

    /**
     * The whole model's parameters and optimizer state ({@code state}: by name, each the whole table's count of fp32,
     * host memory) gathered on stage 0; the other stages only send theirs. A collective of the pipeline group.
     */
    void gatherState(MemorySegment params, Map<String, MemorySegment> state) {
        ParameterTable whole = wholeTable();
        Map<String, MemorySegment> w = new LinkedHashMap<>();
        w.put(StageCheckpoint.PARAMS, params);
        w.putAll(state);
        onEveryRank(comm, c -> {
            int i = comm != null ? 0 : c.rank();
            PipelineRank r = ranks.get(i);
            io.accel4j.grid.ProcessGrid g = grids.get(i);
            try (io.accel4j.core.memory.DeviceArena scratch = r.network().memory().arena()) {
                Map<String, MemorySegment> mine = r.wholeState(scratch); // ZeRO-1: a collective of the replicas
                if (g == null || g.coordinates().dp() == 0) {
                    StageShards.gather(r, mine, this::stageTable, whole, w, tiedCopies());
                }
            }
        });
    }

    /**
     * Every stage held here takes its parameters and optimizer state from the whole model's (as {@link #gatherState}
     * gave them), continues at {@code step} with the loss scaler's state.
     */
    void restoreState(MemorySegment params, Map<String, MemorySegment> state, int step, float lossScale,
                      int cleanSteps, int skippedSteps) {
        restoreState(params, state, step, (long) step * layout.micro(), lossScale, cleanSteps, skippedSteps);
    }

    /** {@link #restoreState}, the data sources skipping {@code batches} of their own. */
    private void restoreState(MemorySegment params, Map<String, MemorySegment> state, int step, long batches,
                              float lossScale, int cleanSteps, int skippedSteps) {
        ParameterTable whole = wholeTable();
        Map<String, MemorySegment> w = new LinkedHashMap<>(state);
        w.put(StageCheckpoint.PARAMS, params);
        for (PipelineRank r : ranks) {
            try (io.accel4j.core.memory.DeviceArena scratch = r.network().memory().arena()) {
                Map<String, MemorySegment> mine = r.stateToFill(scratch);
                StageShards.scatter(r, mine, whole, w);
                r.takeState(mine);
            }
            r.scaler().restore(lossScale, cleanSteps, skippedSteps);
            r.resumeAt(step, batches);
        }
    }

    /**
     * The whole model's parameters (the one-rank model's table, {@link LearnerBuilder#parameterOrder}) gathered into
     * {@code host} on stage 0; the other stages only send theirs. A collective of the pipeline group.
     */
    void gatherParameters(MemorySegment host) {
        ParameterTable whole = wholeTable();
        forEachStage(r -> StageShards.gather(r, Map.of(StageCheckpoint.PARAMS, r.network().params()),
                this::stageTable, whole, Map.of(StageCheckpoint.PARAMS, host), tiedCopies()));
    }

    /** Every stage held here takes its tensors (its tied copy the tensor it copies) from the whole model's {@code host}. */
    void loadParameters(MemorySegment host) {
        ParameterTable whole = wholeTable();
        for (PipelineRank r : ranks) {
            StageShards.scatter(r, Map.of(StageCheckpoint.PARAMS, r.network().params()), whole,
                    Map.of(StageCheckpoint.PARAMS, host));
        }
    }

    /**
     * Continues from a checkpoint of the whole model (saved by a pipeline of any number of stages, or by one rank):
     * every stage takes its tensors and their optimizer state by name.
     */
    void resume(java.nio.file.Path dir) throws java.io.IOException {
        ParameterTable whole = wholeTable();
        try (Arena a = Arena.ofShared()) {
            Map<String, MemorySegment> w = new LinkedHashMap<>();
            MemorySegment params = a.allocate(whole.fp32Bytes(), 64);
            LearnerCheckpoint.readModel(dir, whole, params);
            for (String k : ranks.get(0).optimizer().state().keySet()) {
                w.put(k, a.allocate(whole.fp32Bytes(), 64));
            }
            LearnerCheckpoint.State st = LearnerCheckpoint.readState(dir, w);
            if (st.fp8().length > 0) {
                throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE), "FP8 state",
                        "is present: a pipeline does not run FP8 yet");
            }
            long skip;
            try {
                skip = st.batchesPerReplica(cfg.B, replicas);
            } catch (IllegalArgumentException e) {
                throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE),
                        "data position", e.getMessage());
            }
            try {
                restoreState(params, w, st.step(), skip, st.lossScale(), st.cleanSteps(), st.skippedSteps());
            } catch (IllegalArgumentException e) {
                throw new io.accel4j.train.io.FileFormatException(dir.resolve(LearnerCheckpoint.STATE),
                        "scaler state", e.getMessage());
            }
        }
    }

    /** The names of the last stage's copies of tied tensors (none for one stage). */
    private java.util.Set<String> tiedCopies() {
        if (layout.stages() == 1) {
            return java.util.Set.of();
        }
        return model.ties().stream().map(StagedModel.Tie::last).collect(java.util.stream.Collectors.toSet());
    }

    /** The one-rank model's parameter table (what a checkpoint holds). */
    private ParameterTable wholeTable() {
        NetworkSpec s = Network.of(cfg.model.get()).batch(cfg.B, cfg.T).parameterOrder(cfg.order);
        s = cfg.tokens > 0 ? s.tokens(cfg.tokens) : s.features(cfg.features);
        return StageNetwork.plannedTable(s);
    }

    /** Stage {@code s}'s parameter table, planned. */
    private ParameterTable stageTable(int s) {
        int from = split.from(s);
        NetworkSpec spec = Network.of(model.stage(from, split.to(s))).batch(cfg.B, cfg.T)
                .parameterOrder(model.order());
        spec = s == 0 && cfg.tokens > 0 ? spec.tokens(cfg.tokens) : spec.features(model.inputWidth(from));
        return StageNetwork.plannedTable(spec);
    }

    int completed() {
        return ranks.get(0).completed();
    }

    String describe() {
        return ranks.get(0).optimizer().describe() + ", pipeline of " + layout.stages() + " stages ("
                + layout.micro() + " micro-batches, " + layout.schedule().name() + ")"
                + (tensor > 1 ? " × " + tensor + " tensor ranks" : "")
                + (replicas > 1 ? " × " + replicas + " data-parallel replicas" : "")
                + (cfg.zero > 0 ? " (ZeRO-" + cfg.zero + ")" : "")
                + (cfg.storage != io.accel4j.core.DType.FP32 ? ", saved activations in " + cfg.storage : "");
    }

    private void closeRest() {
        if (group != null) {
            group.close();
        }
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception ignored) {
                // a pool's close does not throw
            }
        }
        owned.clear();
    }

    @Override
    public void close() {
        for (PipelineRank r : ranks) {
            r.close();
        }
        for (io.accel4j.grid.ProcessGrid g : grids) {
            if (g != null) {
                g.close();
            }
        }
        closeRest();
    }
}
