package io.accel4j.pipeline;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.fit.DataSource;
import io.accel4j.nn.Network;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.StageNetwork;
import io.accel4j.optim.LrSchedule;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.precision.Precision;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One rank of a pipeline: stage {@code comm.rank()} of {@code comm.size()} ({@link Partition}), its
 * {@link StageNetwork}, its optimizer over its own parameters, and one optimizer step per global batch of M
 * micro-batches run as the {@link Timeline} of the {@link Schedule} says: activations and their gradients passed to
 * the neighbouring stages with {@code sendAsync}/{@code recvAsync} (receives posted ahead of the computation that needs
 * them), gradients accumulated over the micro-batches (each scaled by {@code 1/(B·T·M)} times the loss scale), the
 * tied tensors' gradients summed between the first and last stage, then — agreed by every stage ({@link StageValues})
 * — the loss, the overflow check (fp16) and the global gradient norm for clipping (a tied tensor counted once), and
 * the update. The communicator is the pipeline group (the whole world for now; a sub-communicator of a process grid
 * later). The first and the last stage each read the data source (the same batches): the first uses the inputs, the
 * last the targets.
 */
public final class PipelineRank implements AutoCloseable {

    /**
     * What every stage is built and trained with; {@code storage}: how the blocks store the activations they save for
     * backward (FP32, or BF16/FP16: {@link io.accel4j.nn.NetworkSpec#activationStorage}).
     */
    public record Options(int B, int T, int micro, int vocabulary, int classes, DType operands, Recompute recompute,
                          OptimizerSpec optimizer, LrSchedule schedule, float gradClip, long seed, DType storage) {
        public Options {
            Objects.requireNonNull(operands, "operands");
            Objects.requireNonNull(recompute, "recompute");
            Objects.requireNonNull(optimizer, "optimizer");
            Objects.requireNonNull(schedule, "schedule");
            Objects.requireNonNull(storage, "storage");
        }

        /** The options with the saved activations in fp32. */
        public Options(int B, int T, int micro, int vocabulary, int classes, DType operands, Recompute recompute,
                       OptimizerSpec optimizer, LrSchedule schedule, float gradClip, long seed) {
            this(B, T, micro, vocabulary, classes, operands, recompute, optimizer, schedule, gradClip, seed,
                    DType.FP32);
        }

        /** These options with the saved activations stored in {@code storage}. */
        public Options storing(DType storage) {
            return new Options(B, T, micro, vocabulary, classes, operands, recompute, optimizer, schedule, gradClip,
                    seed, storage);
        }
    }

    private final Communicator comm;
    private final int stage;
    private final int stages;
    private final Options o;
    private final Timeline timeline;
    private final StagedModel model;
    private final StageNetwork net;
    private Optimizer optimizer;
    private final LossScaler scaler;
    private final DataSource data;
    private final StageValues values;
    /** The stage's Σg² and overflow agreed over its tensor group, or null when the stage is not split. */
    private final StageValues tensorValues;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment inputs;
    private final MemorySegment targets;
    private final ParameterTable.Entry tied; // this stage's tied tensor (first or last stage), or null
    private final MemorySegment tieScratch;
    private final io.accel4j.core.memory.DeviceArena tieArena;
    private int step;
    private double idle;
    private long busyNanos;
    /** The D replicas of this stage (data parallelism around the pipeline), or null for one. */
    private StageReplicas replicas;

    /**
     * Builds stage {@code comm.rank()} of {@code model} as {@code split} cuts it, initialised from the seed (a tied
     * copy from the first stage), reading {@code data}. A collective when ties cross stages.
     */
    public PipelineRank(StagedModel model, Partition split, Schedule schedule, Communicator comm, Ops ops,
                        DataSource data, Options o) {
        this(model, split, schedule, comm, null, ops, data, o);
    }

    /**
     * {@link #PipelineRank(StagedModel, Partition, Schedule, Communicator, Ops, DataSource, Options)} with the stage's
     * tensor-parallel blocks split over {@code tensor} (this rank's tensor group, whose ranks hold the same stage and
     * read the same data; null or one rank: not split): the gradient norm and the overflow check then count every
     * split tensor once through its shards and every replicated one once.
     */
    public PipelineRank(StagedModel model, Partition split, Schedule schedule, Communicator comm,
                        Communicator tensor, Ops ops, DataSource data, Options o) {
        this.comm = comm;
        this.stage = comm.rank();
        this.stages = comm.size();
        if (split.stages() != stages) {
            throw new IllegalArgumentException("the split has " + split.stages() + " stages, the pipeline group "
                    + stages + " ranks");
        }
        this.o = o;
        this.model = model;
        this.data = data;
        this.timeline = Timeline.of(schedule, stages, o.micro());
        boolean first = stage == 0, last = stage == stages - 1;
        int from = split.from(stage), to = split.to(stage);
        NetworkSpec spec = Network.of(model.stage(from, to)).batch(o.B(), o.T()).recompute(o.recompute())
                .matmulOperands(o.operands()).activationStorage(o.storage()).parameterOrder(model.order())
                .tensorParallel(tensor);
        spec = first && o.vocabulary() > 0 ? spec.tokens(o.vocabulary()) : spec.features(model.inputWidth(from));
        if (last) {
            spec = spec.classes(o.classes());
        }
        StageNetwork n;
        try {
            n = StageNetwork.build(spec, first, last, StagePlan.backwardNext(timeline, stage), ops);
        } catch (io.accel4j.nn.ShapeException e) {
            throw new io.accel4j.nn.ShapeException("pipeline stage " + stage + " (layers " + from + "-" + (to - 1)
                    + "): " + e.getMessage());
        }
        Optimizer opt = null;
        StageValues v = null, tv = null;
        try {
            n.initialise(o.seed());
            opt = o.optimizer().create(ops, n.table(), n.params(), n.grads());
            v = new StageValues(comm, 3);
            tv = n.tensor().size() > 1 ? new StageValues(n.tensor().communicator(), 2) : null;
        } catch (RuntimeException | Error e) {
            n.close();
            if (opt != null) {
                opt.close();
            }
            if (v != null) {
                v.close();
            }
            arena.close();
            throw e;
        }
        this.net = n;
        this.optimizer = opt;
        this.values = v;
        this.tensorValues = tv;
        this.scaler = new LossScaler(Precision.of(o.operands()));
        long rows = (long) o.B() * o.T();
        this.inputs = arena.allocate(rows * Math.max(1, net.inputWidth()) * Float.BYTES, 64);
        this.targets = arena.allocate(rows * Integer.BYTES, 64);
        this.tied = stages > 1 ? tiedEntry(model) : null;
        this.tieArena = net.memory().arena();
        this.tieScratch = tied == null ? null : tieArena.allocate(tied.count() * Float.BYTES);
        if (tied != null) { // the last stage's copy starts as the first stage's tensor
            MemorySegment p = slice(net.params(), tied);
            if (first) {
                comm.send(p, tied.count(), DType.FP32, stages - 1);
            } else {
                comm.recv(p, tied.count(), DType.FP32, 0);
            }
        }
    }

    private ParameterTable.Entry tiedEntry(StagedModel model) {
        for (StagedModel.Tie t : model.ties()) {
            String name = stage == 0 ? t.first() : stage == stages - 1 ? t.last() : null;
            if (name != null && net.table().entries().stream().anyMatch(e -> e.name().equals(name))) {
                return net.table().entry(name);
            }
        }
        return null;
    }

    private static MemorySegment slice(MemorySegment buf, ParameterTable.Entry e) {
        return buf.asSlice(e.offset() * Float.BYTES, e.count() * Float.BYTES);
    }

    /** This stage's network. */
    public StageNetwork network() {
        return net;
    }

    public Optimizer optimizer() {
        return optimizer;
    }

    public LossScaler scaler() {
        return scaler;
    }

    public Timeline timeline() {
        return timeline;
    }

    /** The tied tensor this stage holds a copy of (skipped when gathering the model), or null. */
    public ParameterTable.Entry tiedCopy() {
        return stage == stages - 1 ? tied : null;
    }

    /** The name of the tensor this stage's {@link #tiedCopy()} copies, or null. */
    public String tiedTo() {
        ParameterTable.Entry c = tiedCopy();
        return c == null ? null : tieOf(c.name());
    }

    private String tieOf(String lastName) {
        return model.ties().stream().filter(t -> t.last().equals(lastName)).map(StagedModel.Tie::first).findFirst()
                .orElseThrow();
    }

    /** The pipeline group. */
    public Communicator communicator() {
        return comm;
    }

    /** Whether the data source can skip what it gave (a resumed run then continues bit for bit). */
    public boolean resumable() {
        return data instanceof DataSource.Resumable;
    }

    /** Optimizer steps completed. */
    public int completed() {
        return step;
    }

    /** Micro-batches read so far. */
    public long batchesRead() {
        return (long) step * o.micro();
    }

    /** Continues at step {@code s}, skipping what the data had given ({@code s·M} batches) when it can. */
    public void resumeAt(int s) {
        resumeAt(s, (long) s * o.micro());
    }

    /** Continues at step {@code s}, {@code batches} of this replica's batches into the data (when it can skip). */
    public void resumeAt(int s, long batches) {
        this.step = s;
        if (data instanceof DataSource.Resumable r) {
            r.skip(batches);
        }
    }

    /** The fraction of the last step's forward-backward this stage waited (not computing). */
    public double idleFraction() {
        return idle;
    }

    /**
     * Data parallelism around the pipeline: this stage is one of {@code replicas.size()} replicas (rank = replica),
     * each reading its own share of the batches; every step averages the stage's gradients over them (after the
     * tied-weight exchange, before the norm, the overflow check and the update, so every replica updates alike) and
     * reports their mean loss. Call once, before the first step; the communicator stays the caller's.
     */
    public void replicatedOver(Communicator replicas) {
        replicatedOver(replicas, 0);
    }

    /**
     * {@link #replicatedOver(Communicator)} with ZeRO stage {@code zero} over the replicas: 0, none; 1, the optimizer
     * state sharded (replica r updates chunk r of the stage's flat parameters, then an all-gather over the replicas
     * hands every replica the others': DDP's bits, a D-th of its optimizer state).
     *
     * @throws IllegalArgumentException for a stage other than 0 or 1, or ZeRO over one replica
     */
    public void replicatedOver(Communicator replicas, int zero) {
        if (step != 0 || this.replicas != null) {
            throw new IllegalStateException("replicatedOver is set once, before the first step");
        }
        if (zero == 1 && replicas.size() < 2) {
            throw new IllegalArgumentException("ZeRO-1 shards the optimizer state over the data-parallel replicas: "
                    + "it needs 2 or more, got " + replicas.size());
        }
        if (replicas.size() > 1) {
            this.replicas = new StageReplicas(replicas, zero, net.table().count());
            Optimizer sharded = this.replicas.shardedOptimizer(o.optimizer(), net);
            if (sharded != null) {
                optimizer.close();
                optimizer = sharded;
            }
        }
    }

    /**
     * The stage's parameters and whole optimizer state by name ({@code "params"} first), each the stage table's count
     * of fp32: under ZeRO-1 the state's chunks all-gathered over the replicas into {@code scratch} (a collective of
     * the data-parallel group), else the optimizer's own buffers.
     */
    public java.util.Map<String, MemorySegment> wholeState(io.accel4j.core.memory.DeviceArena scratch) {
        return stateBuffers(scratch, true);
    }

    /**
     * Buffers as {@link #wholeState} lays them out, for a checkpoint to fill; then {@link #takeState} (under ZeRO-1
     * the state's are {@code scratch}'s, else the optimizer's own). No communication.
     */
    public java.util.Map<String, MemorySegment> stateToFill(io.accel4j.core.memory.DeviceArena scratch) {
        return stateBuffers(scratch, false);
    }

    /** Under ZeRO-1, this replica's chunks of {@code filled} ({@link #stateToFill}'s) into the optimizer's state. */
    public void takeState(java.util.Map<String, MemorySegment> filled) {
        if (replicas != null) {
            replicas.takeState(optimizer, net, filled);
        }
    }

    private java.util.Map<String, MemorySegment> stateBuffers(io.accel4j.core.memory.DeviceArena scratch,
                                                               boolean gather) {
        java.util.Map<String, MemorySegment> m = new java.util.LinkedHashMap<>();
        m.put(StageCheckpoint.PARAMS, net.params());
        m.putAll(replicas != null ? replicas.wholeState(optimizer, net, scratch, gather) : optimizer.state());
        return m;
    }

    /** One optimizer step over a global batch of M micro-batches; every stage returns the same metrics. */
    public StepMetrics step() {
        int s = step;
        long t0 = System.nanoTime();
        Ops ops = net.ops();
        long count = net.table().count();
        float lossScale = scaler.scale();
        float dlossScale = 1f / ((float) o.B() * o.T() * o.micro()) * lossScale;
        net.zeroGrad();
        double lossSum = runMicroBatches(dlossScale);
        long t1 = System.nanoTime();
        exchangeTiedGradients(ops);
        if (replicas != null) { // the replicas' mean gradient and loss, before the norm and the overflow check
            lossSum = replicas.average(net.grads(), count, lossSum);
        }
        boolean nonFinite = scaler.enabled() && ops.hasNonFinite(net.grads(), count);
        double stageSq;
        if (tensorValues == null) {
            stageSq = sumOfSquares(ops, count);
        } else { // the tensor ranks' shares in rank order: the same bits on each
            stageSq = 0;
            for (double[] v : tensorValues.gather(tensorShare(ops), nonFinite ? 1 : 0)) {
                stageSq += v[0];
                nonFinite |= v[1] != 0;
            }
        }
        double[][] all = values.gather(lossSum, stageSq, nonFinite ? 1 : 0);
        double loss = 0, sq = 0;
        boolean overflow = false;
        for (double[] v : all) {
            loss += v[0]; // only the last stage's is not 0
            sq += v[1];
            overflow |= v[2] != 0;
        }
        loss /= o.micro();
        double norm = overflow ? Double.NaN : Math.sqrt(sq) / lossScale;
        if (!Double.isFinite(loss) || !overflow && !Double.isFinite(norm)) {
            throw new IllegalStateException("training diverged at step " + s + " (loss " + loss + ", gradient norm "
                    + norm + "): lower the learning rate or clip the gradients");
        }
        float lr = o.schedule().lr(s);
        if (!overflow) {
            float clip = o.gradClip() > 0 && norm > o.gradClip() ? (float) (o.gradClip() / norm) : 1f;
            optimizer.step(s + 1 - scaler.skippedSteps(), lr, clip / lossScale);
            if (replicas != null) {
                replicas.afterUpdate(net.params(), count);
            }
        }
        scaler.afterStep(overflow);
        step = s + 1;
        double ms = (System.nanoTime() - t0) / 1e6;
        double perS = (double) o.B() * o.T() * o.micro() / (ms / 1e3);
        idle = Math.max(0, 1 - busyNanos / (double) (t1 - t0));
        return scaler.enabled()
                ? new StepMetrics(s, loss, Double.NaN, ms, perS, lr, norm, lossScale, overflow, scaler.skippedSteps())
                : new StepMetrics(s, loss, Double.NaN, ms, perS, lr, norm);
    }

    /**
     * Runs this stage's events of the timeline; returns the sum of the micro-batches' mean losses on the last stage, 0
     * on the others.
     */
    private double runMicroBatches(float dlossScale) {
        int M = o.micro(), B = o.B(), T = o.T();
        long rows = (long) B * T;
        StageNetwork.Slot[] slots = new StageNetwork.Slot[M];
        Pending[] arrivals = new Pending[M];
        List<Pending> sends = new ArrayList<>();
        double lossSum = 0;
        busyNanos = 0;
        for (Timeline.Event e : timeline.events(stage)) {
            int m = e.micro();
            switch (e.kind()) {
                case RECV_ACTIVATION -> {
                    slots[m] = net.acquire();
                    arrivals[m] = comm.recvAsync(slots[m].input(), rows * net.inputWidth(), DType.FP32, stage - 1);
                }
                case FORWARD -> {
                    if (arrivals[m] != null) {
                        arrivals[m].await();
                        arrivals[m] = null;
                    }
                    long c0 = System.nanoTime();
                    boolean first = stage == 0;
                    if (first) {
                        slots[m] = net.acquire();
                    }
                    if (first || net.last()) {
                        data.next(inputs, targets);
                        net.load(slots[m], first ? inputs : null, net.last() ? targets : null, B, T);
                    }
                    net.forward(slots[m], B, T);
                    busyNanos += System.nanoTime() - c0;
                }
                case SEND_ACTIVATION -> sends.add(comm.sendAsync(slots[m].output(), rows * net.outputWidth(),
                        DType.FP32, stage + 1));
                case RECV_GRADIENT -> arrivals[m] = comm.recvAsync(slots[m].outputGradient(),
                        rows * net.outputWidth(), DType.FP32, stage + 1);
                case BACKWARD -> {
                    if (arrivals[m] != null) {
                        arrivals[m].await();
                        arrivals[m] = null;
                    }
                    long c0 = System.nanoTime();
                    double loss = net.backward(slots[m], dlossScale);
                    if (net.last()) {
                        lossSum += loss;
                    }
                    busyNanos += System.nanoTime() - c0;
                    if (stage == 0) {
                        net.release(slots[m]);
                        slots[m] = null;
                    }
                }
                case SEND_GRADIENT -> {
                    // the slot's later receives are queued behind this send, so it may be taken again at once
                    sends.add(comm.sendAsync(slots[m].inputGradient(), rows * net.inputWidth(), DType.FP32,
                            stage - 1));
                    net.release(slots[m]);
                    slots[m] = null;
                }
            }
        }
        for (Pending p : sends) {
            p.await();
        }
        return lossSum;
    }

    /** The first and last stage's tied gradients, each replaced by their sum (the same bits on both). */
    private void exchangeTiedGradients(Ops ops) {
        if (tied == null) {
            return;
        }
        MemorySegment g = slice(net.grads(), tied);
        long n = tied.count();
        if (stage == 0) {
            comm.send(g, n, DType.FP32, stages - 1);
            comm.recv(tieScratch, n, DType.FP32, stages - 1);
        } else {
            comm.recv(tieScratch, n, DType.FP32, 0);
            comm.send(g, n, DType.FP32, 0);
        }
        ops.residualForward(g, g, tieScratch, n);
    }

    /** {@code Σ g²} of this stage's gradients, without the last stage's copy of a tied tensor. */
    private double sumOfSquares(Ops ops, long count) {
        ParameterTable.Entry skip = tiedCopy();
        if (skip == null) {
            return ops.sumOfSquares(net.grads(), count);
        }
        double sum = 0;
        if (skip.offset() > 0) {
            sum += ops.sumOfSquares(net.grads(), skip.offset());
        }
        long after = skip.offset() + skip.count();
        if (after < count) {
            sum += ops.sumOfSquares(net.grads().asSlice(after * Float.BYTES), count - after);
        }
        return sum;
    }

    /**
     * This tensor rank's share of the stage's {@code Σ g²}: its shards' whole, a replicated tensor's divided by T
     * (every tensor rank holds it), the last stage's tied copy left out.
     */
    private double tensorShare(Ops ops) {
        ParameterTable.Entry skip = tiedCopy();
        int T = net.tensor().size();
        double mine = 0;
        for (ParameterTable.Entry e : net.table().entries()) {
            if (skip != null && e.name().equals(skip.name())) {
                continue;
            }
            double s = ops.sumOfSquares(slice(net.grads(), e), e.count());
            mine += net.sharding(e.name()).replicated() ? s / T : s;
        }
        return mine;
    }

    @Override
    public void close() {
        if (tensorValues != null) {
            tensorValues.close();
        }
        if (replicas != null) {
            replicas.close();
        }
        values.close();
        tieArena.close();
        optimizer.close();
        net.close();
        arena.close();
    }
}
