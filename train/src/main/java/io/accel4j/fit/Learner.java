package io.accel4j.fit;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.train.StepMetrics;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Training a model of one's own, in the spirit of Accelerate and Lightning: describe the model (a {@link Module} tree,
 * one per rank), what it takes and predicts, the optimizer, schedule, precision and number of ranks, hand over a
 * {@link DataSource.Factory}, and call {@link #fit}. Underneath, each rank has a {@link Network} on its backend, an
 * optimizer that owns its state and a {@link GradientSync} strategy ({@link GradientSync#local()} for one rank,
 * {@link DataParallel} over an in-process ring for several), and runs the same {@link RankStep}; rank 0 reports. With
 * {@link LearnerBuilder#pipeline} the model is cut into stages instead, one per rank ({@link PipelineLearning}), and
 * the methods that need one whole network ({@link #network}, {@link #evaluate}, {@link #predict}) refuse.
 *
 * <pre>{@code
 * try (Learner learner = Learner.of(() -> new Sequential("mlp",
 *             Linear.of("fc1", 2, 64), new Gelu("act"), Linear.of("fc2", 64, 2)))
 *         .features(2).classes(2).batch(128, 1)
 *         .optimizer(AdamW.of(0.0f)).schedule(LrSchedule.constant(1e-2f))
 *         .ranks(2).data(mySource)
 *         .build()) {
 *     learner.fit(500, m -> System.out.println(m.step() + " " + m.trainLoss()));
 * }
 * }</pre>
 */
public final class Learner implements AutoCloseable {


    /** A learner of the model {@code model} makes (called once per rank: a module tree has one place). */
    public static LearnerBuilder of(Supplier<? extends Module> model) {
        return new LearnerBuilder(model);
    }

    private final LearnerBuilder cfg;
    private final List<AutoCloseable> owned = new ArrayList<>();
    private final List<RankStep> ranks = new ArrayList<>();
    private final InProcessGroup group;
    /** The ranks of the run: {@code ranks} in this process, or the communicator's size. */
    private final int world;
    /** The run's rank of each rank held here. */
    private final int[] globalRank;
    private final List<StepMetrics> history = Collections.synchronizedList(new ArrayList<>());
    private final RunOutput output;
    /** The stages when the learner trains with pipeline parallelism, else null. */
    private final PipelineLearning pipeline;
    /** Each held rank's place in the D × 1 × T grid and its groups, under tensor parallelism; else null. */
    private final List<io.accel4j.grid.ProcessGrid> grids;
    /** The whole model in and out of the ranks held here (checkpoints, parameters, state); null for a pipeline. */
    private final RankCheckpoints checkpoints;

    Learner(LearnerBuilder b) {
        this.cfg = b;
        this.output = new RunOutput(b.out, b.classes);
        if (b.pipeline != null) { // a strategy of its own: the stages hold the model between them
            this.pipeline = new PipelineLearning(b);
            this.group = null;
            this.grids = null;
            this.world = b.comm != null ? b.comm.size()
                    : Math.max(b.ranks, b.pipeline.stages() * b.tensorParallel);
            this.globalRank = new int[] {pipeline.lead() ? 0 : b.comm.rank()};
            this.checkpoints = null;
            return;
        }
        this.pipeline = null;
        this.group = b.comm == null && b.ranks > 1 ? InProcessGroup.create(b.ranks, b.collectiveTimeout) : null;
        this.world = b.comm != null ? b.comm.size() : b.ranks;
        int held = b.comm != null ? 1 : b.ranks;
        this.globalRank = new int[held];
        this.checkpoints = new RankCheckpoints(ranks, globalRank, this::forEachRank, b, world);
        io.accel4j.grid.GridLayout layout = b.tensorParallel > 1
                ? io.accel4j.grid.GridLayout.of(world, 1, b.tensorParallel) : null;
        this.grids = layout == null ? null : new ArrayList<>();
        try {
            if (layout != null) { // a collective of every rank: the groups are split from the world
                grids.addAll(b.comm != null ? List.of(io.accel4j.grid.ProcessGrid.of(b.comm, layout))
                        : group.runAgain(comm -> io.accel4j.grid.ProcessGrid.of(comm, layout)));
            }
            int perRank = Math.max(1, b.threads / held);
            for (int i = 0; i < held; i++) {
                int r = b.comm != null ? b.comm.rank() : i;
                globalRank[i] = r;
                Ops ops;
                if (b.backend != null) {
                    ops = Objects.requireNonNull(b.backend.apply(r), "the backend of rank " + r);
                } else {
                    Parallel pool = new Parallel(perRank);
                    owned.add(pool);
                    ops = new CpuOps(pool);
                }
                io.accel4j.grid.ProcessGrid grid = grids == null ? null : grids.get(i);
                io.accel4j.collectives.Communicator c = grid != null ? grid.data() : b.comm != null ? b.comm
                        : group != null ? group.communicator(r) : null;
                ranks.add(RankAssembly.build(b, optimizerOf(b, perRank), ops, c, grid, grid != null ? grid.coordinates().dp() : r,
                        grid != null ? layout.dp() : world));
            }
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
    }

    /** The builder's optimizer, on a host backend of {@code threads} threads of its own when offloaded. */
    private io.accel4j.optim.OptimizerSpec optimizerOf(LearnerBuilder b, int threads) {
        if (!b.offloadOptimizer) {
            return b.optimizer;
        }
        Parallel pool = new Parallel(threads);
        owned.add(pool);
        return new io.accel4j.optim.Offload(b.optimizer, new CpuOps(pool), b.offloadOverlap);
    }

    /** Buckets the first rank held here started during backward so far (0 without {@code bucketMb}; for tests). */
    int buckets() {
        return !ranks.isEmpty() && ranks.get(0).sync() instanceof BucketedDataParallel b ? b.buckets() : 0;
    }

    /** Whether the run's rank 0 is held here (it reports and writes). */
    private boolean lead() {
        return globalRank[0] == 0;
    }

    /** The first rank held here's network (every rank's parameters are the same). */
    public Network network() {
        if (pipeline != null) {
            throw new IllegalStateException("a pipeline's model is split over its stages: see stages()");
        }
        return ranks.get(0).network();
    }

    /** The optimizer's description. */
    public String describe() {
        if (pipeline != null) {
            return pipeline.describe();
        }
        return ranks.get(0).optimizer().describe() + ", " + world + " rank" + (world == 1 ? "" : "s")
                + (cfg.tensorParallel > 1 ? " (" + world / cfg.tensorParallel + " data-parallel × "
                + cfg.tensorParallel + " tensor)" : "")
                + (cfg.zero > 0 ? " (ZeRO-" + cfg.zero + ")" : "")
                + ", " + (cfg.fp8 != null ? "FP8 linear layers (" + cfg.fp8.format() + ")" : cfg.precision
                + " matmul operands") + (cfg.storage != io.accel4j.core.DType.FP32 ? ", saved activations in "
                + cfg.storage : "") + ", " + network().table().count() + " parameters"
                + (cfg.tensorParallel > 1 ? " per rank (" + wholeTable().count() + " in all)" : "");
    }

    /** Steps completed. */
    public int step() {
        return pipeline != null ? pipeline.completed() : ranks.get(0).completed();
    }

    /** The metrics of every step so far (rank 0's view). */
    public List<StepMetrics> history() {
        return List.copyOf(history);
    }

    /**
     * Fields the strategy adds to the metrics of the run's rank 0's last step, as JSON ({@code ,"name":value…}, to
     * append to a metrics line): with {@link LearnerBuilder#asyncWorkers} the staleness of the updates the servers
     * applied since rank 0's previous step ({@code staleness_min}, {@code staleness_mean}, {@code staleness_max}: the
     * metrics fields of {@code accel4j train --sync async}); empty for the other strategies and for a pipeline. Read it in
     * {@link #fit}'s consumer (called after each of rank 0's steps, on its thread) or between fits; on a process
     * that does not hold rank 0, that process's rank's (all zero for async workers).
     */
    public String strategyJson() {
        return pipeline != null ? "" : ranks.get(0).sync().stepJson();
    }

    /**
     * Trains {@code steps} optimizer steps on every rank, telling {@code each} rank 0's metrics after each; returns
     * them.
     */
    public List<StepMetrics> fit(int steps, Consumer<StepMetrics> each) {
        List<StepMetrics> mine = new ArrayList<>(steps);
        int first = step();
        io.accel4j.cli.train.Progress lines = cfg.progress == null || !lead() ? null
                : new io.accel4j.cli.train.Progress(cfg.progress, first + steps, first);
        Consumer<StepMetrics> report = m -> {
            mine.add(m);
            history.add(m);
            if (lead()) {
                output.append(m, strategyJson());
            }
            if (lines != null) {
                lines.step(m);
            }
            if (each != null) {
                each.accept(m);
            }
        };
        if (pipeline != null) {
            pipeline.fit(steps, report);
        } else if (group == null) { // one rank here: this process's
            for (int s = 0; s < steps; s++) {
                report.accept(ranks.get(0).step());
            }
        } else {
            onEveryRank(rank -> {
                for (int s = 0; s < steps; s++) {
                    StepMetrics m = ranks.get(rank).step();
                    if (rank == 0) {
                        report.accept(m);
                    }
                }
            });
        }
        if (lead() && output.writes()) {
            output.plot(history(), describe());
        }
        return mine;
    }

    /**
     * Writes a checkpoint into {@code dir} ({@value LearnerCheckpoint#MODEL} and {@value LearnerCheckpoint#STATE}, each
     * atomically): the parameters with the module tree's table, the step, the loss scaler, the FP8 state, how many
     * batches the sources have given, and every optimizer state buffer whole (ZeRO's shards gathered). Between
     * {@link #fit} calls; {@link #resume} continues from it.
     */
    public void save(Path dir) throws IOException {
        if (pipeline != null) {
            pipeline.save(dir);
            return;
        }
        checkpoints.save(dir);
    }

    /**
     * Continues from the checkpoint {@link #save} wrote in {@code dir}: every rank's parameters, optimizer state (its
     * shard), step, loss scaler and FP8 state; the data sources skip what they had given when they are
     * {@link DataSource.Resumable} (then the run continues bit for bit), else they start afresh. The checkpoint holds
     * the whole model, so it resumes under another tensor-parallel layout than it was saved from.
     *
     * @throws io.accel4j.nn.ShapeException naming the first tensor when the checkpoint is of another module tree
     * @throws io.accel4j.train.io.FileFormatException naming the file and field of a malformed or mismatched one
     */
    public void resume(Path dir) throws IOException {
        if (pipeline != null) {
            pipeline.resume(dir);
            return;
        }
        checkpoints.resume(dir);
    }

    /**
     * Bytes of the first held rank's optimizer state (its ZeRO shard's), as allocated: with bf16 working weights
     * ({@link LearnerBuilder#parameterStorage}) the fp32 master too, besides {@link #stateNames()}' m and v.
     */
    public long optimizerStateBytes() {
        return ranks.get(0).optimizer().stateBytes();
    }

    /**
     * Bytes the first held rank allocated for its model states: parameters and gradients (whole, or ZeRO-2/3's shards
     * with their {@link #workingBytes}) and the optimizer's state; the CLI trainer's {@code modelStateBytes}.
     */
    public long modelStateBytes() {
        return RankMemory.modelStateBytes(firstRank());
    }

    /**
     * Bytes the first held rank's model allocated: parameters and gradients (as {@link #modelStateBytes} counts them)
     * and activations ({@code network().activationBytes()}); the CLI trainer's "model …: N parameters, X MiB
     * allocated (activations Y MiB)" line.
     */
    public long modelBytes() {
        return RankMemory.modelBytes(firstRank());
    }

    /** Bytes of ZeRO-2/3's working buffers for the units in use, within {@link #modelStateBytes} (else 0). */
    public long workingBytes() {
        return RankMemory.workingBytes(firstRank());
    }

    /**
     * Model-state bytes per rank by the ZeRO paper's accounting (fp32 states) for this run's stage and data-parallel
     * ranks; {@code zeroMemory().describe(modelStateBytes(), workingBytes())} is the CLI trainer's start-up line.
     */
    public io.accel4j.train.parallel.ZeroMemory zeroMemory() {
        return RankMemory.accounting(cfg.zero, world / cfg.tensorParallel, firstRank().network().table().count());
    }

    private RankStep firstRank() {
        if (pipeline != null) {
            throw new IllegalStateException("a pipeline's model is split over its stages: see stages()");
        }
        return ranks.get(0);
    }

    /**
     * Sets every held rank's parameters from the whole model's {@code whole} (host, {@link #wholeTable()}'s layout,
     * e.g. an llm.c model file's body for GPT-2): each tensor rank takes its shards, each pipeline stage its tensors
     * by name. Not a collective; every process of a communicator calls it with the same values. Before {@link #fit}:
     * the optimizer state is not touched.
     */
    public void loadParameters(MemorySegment whole) {
        if (pipeline != null) {
            pipeline.loadParameters(whole);
            return;
        }
        checkpoints.loadParameters(whole);
    }

    /**
     * Checks that every data-parallel rank holds bit for bit the same parameters (a hash of each rank's compared over
     * the ranks: {@code ReplicaCheck}), as after {@link #loadParameters} from one file or {@link #resume}: a
     * collective of every rank. Only where each rank holds the whole fp32 vector (one rank, DDP, ZeRO-1, ZeRO-2 over
     * the whole buffer); it does nothing for sharded parameters (ZeRO-3, unit sharding), bf16 working weights, tensor
     * ranks and pipeline stages.
     *
     * @throws IllegalStateException on every rank when the ranks' parameters differ, naming the rank's checksum
     */
    public void checkReplicas() {
        if (pipeline != null || cfg.tensorParallel > 1) {
            return;
        }
        forEachRank(r -> {
            RankStep s = ranks.get(r);
            if (s.sync().ranks() > 1 && s.network().flat()) {
                ReplicaCheck.check(s.sync(), globalRank[r], s.network());
            }
        });
    }

    /** The whole model's parameter table (the one-rank network's; this rank's own when not split). */
    public io.accel4j.nn.ParameterTable wholeTable() {
        return io.accel4j.nn.TensorShards.of(network()).whole();
    }

    /**
     * The whole model's parameters ({@link #wholeTable()}'s layout) into {@code host} on the run's rank 0 (other
     * processes' {@code host} is left as it is): a collective of every rank (the tensor shards are gathered; a
     * pipeline's stages gathered by name).
     */
    public void gatherParameters(MemorySegment host) {
        if (pipeline != null) {
            pipeline.gatherParameters(host);
            return;
        }
        checkpoints.gatherParameters(host);
    }

    /** Runs {@code body} for every rank: on this thread for one, on one thread each for several (collectives). */
    private void forEachRank(java.util.function.IntConsumer body) {
        if (group == null) {
            body.accept(0);
        } else {
            onEveryRank(body);
        }
    }

    /**
     * Runs {@code body} on one thread per rank of the in-process group and waits for all; a rank that throws fails the
     * group (the others' collectives then stop within the timeout) and its exception is rethrown.
     */
    private void onEveryRank(java.util.function.IntConsumer body) {
        group.runAgain(comm -> {
            body.accept(comm.rank());
            return null;
        });
    }

    /**
     * The mean loss of rank 0's network over {@code batches} batches of {@code source} (B × T each, the training
     * batch shape). FP8's amax histories stay as they were: training does not depend on when it evaluates.
     */
    public double evaluate(DataSource source, int batches) {
        notSplit("evaluate");
        return inference().evaluate(source, batches);
    }

    /**
     * The most likely class of each of the {@code B·T} positions of {@code inputs} (host memory), by rank 0's network.
     */
    public int[] predict(MemorySegment inputs, int B, int T) {
        notSplit("predict");
        return inference().predict(inputs, B, T);
    }

    private Inference inference() {
        return new Inference(ranks, group == null ? null : this::onEveryRank, cfg.B, cfg.T);
    }

    private void notSplit(String what) {
        if (cfg.tensorParallel > 1) {
            throw new IllegalStateException(what + " runs rank 0's network alone, which a tensor-parallel model "
                    + "cannot (its blocks compute with their group): save and resume on one rank to " + what);
        }
    }

    /** The loss scaler of the run's first rank (or stage) held here: its state is every rank's. */
    public io.accel4j.train.precision.LossScaler lossScaler() {
        return pipeline != null ? pipeline.ranks().get(0).scaler() : ranks.get(0).scaler();
    }

    /** FP8's scaling state (amax histories and scales, the same on every rank), or no bytes without FP8. */
    public byte[] fp8State() {
        io.accel4j.train.model.Fp8State s = pipeline != null ? null : ranks.get(0).network().fp8();
        return s == null ? new byte[0] : s.encode();
    }

    /**
     * Every rank held here takes {@code saved} ({@link #fp8State}) as its FP8 scaling state.
     *
     * @throws IllegalArgumentException when {@code saved} is FP8's and this learner does not run FP8, or the reverse,
     *                                  or it does not fit this network's FP8 layers
     */
    public void restoreFp8State(byte[] saved) {
        boolean fp8 = pipeline == null && ranks.get(0).network().fp8() != null;
        if (fp8 != (saved.length > 0)) {
            throw new IllegalArgumentException("the FP8 state is " + saved.length + " bytes, but this learner "
                    + (fp8 ? "runs FP8" : "does not run FP8"));
        }
        for (RankStep r : fp8 ? ranks : List.<RankStep>of()) {
            r.network().fp8().restore(saved);
        }
    }

    /** The names of the optimizer's state buffers (AdamW: m, v), each one fp32 per parameter. */
    public java.util.Set<String> stateNames() {
        return pipeline != null ? pipeline.ranks().get(0).optimizer().state().keySet()
                : ranks.get(0).optimizer().state().keySet();
    }

    /**
     * The whole model's parameters and optimizer state ({@link #stateNames}; host memory, each
     * {@code table().count()} fp32 in the one-rank network's layout) into {@code params} and {@code state} on the
     * run's rank 0, for a checkpoint of one's own format (the CLI's llm.c files): a pipeline's stages gathered by
     * name, ZeRO's shards gathered from every rank, or rank 0's copy. A collective when the ranks are processes; not
     * under ZeRO-1 with tensor parallelism (use {@link #save}).
     */
    public void gatherState(MemorySegment params, Map<String, MemorySegment> state) {
        if (pipeline != null) {
            pipeline.gatherState(params, state);
            return;
        }
        checkpoints.gatherState(params, state);
    }

    /**
     * Every rank held here continues from the whole model's {@code params} and optimizer {@code state} (as
     * {@link #gatherState} gives them) at step {@code step} with the loss scaler's state; sources that are
     * {@link DataSource.Resumable} skip what the steps before read; under ZeRO each rank takes its shards. Not under
     * ZeRO-1 with tensor parallelism (use {@link #resume}).
     */
    public void restoreState(MemorySegment params, Map<String, MemorySegment> state, int step, float lossScale,
                             int cleanSteps, int skippedSteps) {
        if (pipeline != null) {
            pipeline.restoreState(params, state, step, lossScale, cleanSteps, skippedSteps);
            return;
        }
        checkpoints.restoreState(params, state, step, lossScale, cleanSteps, skippedSteps);
    }

    /** The pipeline's stages held here (all of them in process), or an empty list without pipeline parallelism. */
    public List<io.accel4j.pipeline.PipelineRank> stages() {
        return pipeline == null ? List.of() : pipeline.ranks();
    }

    @Override
    public void close() {
        if (pipeline != null) {
            pipeline.close();
        }
        for (RankStep r : ranks) {
            r.close();
        }
        ranks.clear();
        if (grids != null) {
            for (io.accel4j.grid.ProcessGrid g : grids) {
                g.close();
            }
            grids.clear();
        }
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
}
