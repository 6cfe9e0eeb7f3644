package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.BucketedDataParallel;
import io.accel4j.fit.DataParallel;
import io.accel4j.fit.GradientSync;
import io.accel4j.fit.ZeroSharding;
import io.accel4j.optim.Offload;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.function.IntConsumer;

/**
 * Stages 0 and 1 of the trainer, on the Java API's strategies: the model's flat parameters and gradients, AdamW
 * ({@link io.accel4j.optim.AdamW}, an {@link Optimizer} owning its moments) over this rank's {@link GradientSync.Shard}, and the ranks'
 * agreement — the gradients' average, their norm and overflow check, the update's gather — by the same
 * {@link GradientSync} a {@code Learner} runs: {@link GradientSync#local()} for one rank, {@link DataParallel} for DDP
 * (stage 0: every rank holds everything), {@link ZeroSharding} stage 1 (the moments of chunk r of the flat vector
 * only; after the update an in-place all-gather gives every rank the others' chunks). The gradients are averaged in
 * buckets started during the last micro-batch's backward as layers finish ({@link BucketedDataParallel} over GPT-2's
 * {@link LayerRanges}, with {@link TrainConfig#bucketBytes} &gt; 0 and several ranks), or by the strategy after it.
 * Every rank applies the same update to the same bits, so the replicas stay identical; ZeRO-1 is DDP bit for bit.
 *
 * <p>With {@code offload} (stage 0 only) AdamW runs on the host ({@link Offload}): its moments and an fp32 master
 * copy in host memory, updated by the CPU kernels, gradients copied down and parameters up each step.
 *
 * <p>Checkpoints stay whole: at stage 1 each moment is gathered into the gradient buffer, free between steps, and
 * rank 0 copies it out; {@link #readMoments} reads this rank's chunk back, so a checkpoint resumes at any stage.
 */
final class SyncStates extends ModelStates {

    private final int stage;
    private final GradientSync sync;
    private final GradientSync.Shard shard;
    /** AdamW over the shard: decay on the matrices only, or on everything ({@link TrainConfig}). */
    private final Optimizer adamw;
    private final MemorySegment m;
    private final MemorySegment v;
    /** Whether AdamW runs on the host ({@link Offload}); its pool when the model's backend is not the host's. */
    private final boolean offload;
    private Parallel hostPool;

    SyncStates(int stage, Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload) {
        this(stage, comm, model, cfg, values, offload, true);
    }

    /** With {@code offload}, its step overlapped or not ({@link Offload#overlap()}). */
    SyncStates(int stage, Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload,
               boolean overlap) {
        super(checkRanks(stage, comm, offload), model, values);
        this.stage = stage;
        this.offload = offload;
        GradientSync s = null;
        Optimizer o = null;
        try {
            int room = Math.max(8, values);
            s = GradientSync.of(stage, comm, memory, count, room); // the Java API's choice, and its optimizer's place
            if (comm != null && cfg.bucketBytes() > 0) { // averaged in buckets while backward runs
                s = new BucketedDataParallel(s, model.grads(), count, LayerRanges.of(model.layout()),
                        cfg.bucketBytes());
            }
            OptimizerSpec spec = adamw(cfg);
            if (offload) {
                spec = new Offload(spec, hostOps(model.ops()), overlap);
            }
            o = s.optimizer(spec, model.ops(), model.network().table(), model.params(), model.grads());
            this.shard = s.shard(count);
        } catch (RuntimeException | Error e) {
            if (s != null) {
                s.close();
            }
            close();
            throw e;
        }
        this.sync = s;
        this.adamw = o;
        if (offload) { // the upload overlaps the next forward, unit by unit
            DeferredUpload.wire(o, model);
        }
        this.m = o.state().get("m");
        this.v = o.state().get("v");
    }

    private static Communicator checkRanks(int stage, Communicator comm, boolean offload) {
        if (stage < 0 || stage > 1) {
            throw new IllegalArgumentException("these states are stages 0 and 1, got " + stage);
        }
        if (offload && stage != 0) {
            throw new IllegalArgumentException("the offloaded optimizer does not go with ZeRO stage " + stage
                    + " in the trainer yet");
        }
        if (stage == 1 && comm == null) {
            throw new IllegalArgumentException("ZeRO stage 1 shards over the ranks: it needs a communicator of more "
                    + "than one rank (got 1)");
        }
        return comm;
    }

    /** The model's backend when it computes in host memory (the CPU's), else the Vector API on a pool of its own. */
    private Ops hostOps(Ops ops) {
        if (ops.memory().hostAccessible()) {
            return ops;
        }
        hostPool = new Parallel(Parallel.defaultThreads());
        return new CpuOps(hostPool);
    }

    @Override
    public IntConsumer overlap() {
        return sync.gradientsDone();
    }

    @Override
    public void abandon(Throwable failure) {
        sync.abandon(failure);
    }

    @Override
    public int layerBuckets() {
        return sync instanceof BucketedDataParallel b ? b.buckets() : 0;
    }

    @Override
    public void reduceGradients() {
        sync.reduce(model.grads(), count);
    }

    @Override
    public boolean anyNonFinite() {
        return sync.anyNonFinite(model.ops(), model.grads(), count);
    }

    @Override
    public double sumOfSquares() {
        return sync.sumOfSquares(model.ops(), model.grads(), count);
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        adamw.step(t, decay.lr(), gradScale); // decay's other fields are the spec's: one launch on a GPU
        sync.afterUpdate(model.params(), count);
    }

    @Override
    public void checkReplicas() {
        if (comm != null) {
            adamw.awaitParameters(); // every reader but a unit's forward waits for the whole upload
            ReplicaCheck.check(exchange, comm.rank(), memory, model.params(), count);
        }
    }

    @Override
    public boolean shardsParameters() {
        return false;
    }

    @Override
    public int zeroStage() {
        return stage;
    }

    @Override
    public long stateBytes() { // ZeRO counts its norm's N float64 partials, which the strategy's exchange holds
        return (offload ? 0 : momentBytes()) + (stage == 0 ? 0 : (long) ranks() * Double.BYTES);
    }

    @Override
    public long hostBytes() {
        return offload ? momentBytes() + adamw.hostScratchBytes() : 0;
    }

    @Override
    public long momentBytes() {
        return m.byteSize() + v.byteSize();
    }

    @Override
    public long workingBytes() {
        return 0;
    }

    @Override
    public ZeroMemory accounting() {
        return ZeroMemory.fp32(stage, ranks(), count);
    }

    @Override
    public void copyParameters(MemorySegment dst) {
        adamw.awaitParameters();
        if (dst != null) {
            model.copyParamsToHost(dst);
        }
    }

    @Override
    public Saved gatherForCheckpoint(Arena staging) {
        adamw.awaitParameters(); // the checkpoint writes the model's parameters next
        boolean root = comm == null || comm.rank() == 0;
        if (stage == 0) { // every rank holds the same states: rank 0 writes them
            DeviceMemory mem = adamw.stateMemory(); // the host's when offloaded
            return root ? new Saved(mem.readableOnHost(m, staging), mem.readableOnHost(v, staging), null) : null;
        }
        MemorySegment[] whole = new MemorySegment[2];
        MemorySegment spare = model.grads(); // free between steps: the next one zeroes it
        for (int i = 0; i < 2; i++) {
            sync.gatherShards(i == 0 ? m : v, spare, count, memory); // collective
            if (root) {
                whole[i] = staging.allocate(count * Float.BYTES, 64);
                memory.copyToHost(spare, whole[i]);
            }
        }
        return root ? new Saved(whole[0], whole[1], null) : null;
    }

    @Override
    public void awaitParameters() {
        adamw.awaitParameters();
    }

    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        adamw.awaitParameters();
        try (Arena staging = Arena.ofConfined()) {
            DeviceMemory mem = adamw.stateMemory(); // the host's when offloaded
            MemorySegment hm = mem.writableOnHost(m, staging), hv = mem.writableOnHost(v, staging);
            TrainState.Header h = stage == 0 ? TrainState.read(stateFile, model.config(), hm, hv)
                    : TrainState.read(stateFile, model.config(), hm, hv, shard.offset(), shard.length());
            mem.writeBack(hm, m);
            mem.writeBack(hv, v);
            return h;
        }
    }

    @Override
    public void setParameters(MemorySegment host) {
        adamw.awaitParameters(); // an upload still under way would overwrite them
        model.copyParamsFromHost(host);
        adamw.parametersReplaced();
    }

    @Override
    public void gatherModel(boolean here) {
        adamw.awaitParameters();
    }

    @Override
    public void close() {
        try {
            if (adamw != null) {
                if (offload) {
                    DeferredUpload.unwire(model);
                }
                try {
                    adamw.awaitParameters(); // the model's parameters complete for whoever reads them after
                } finally {
                    adamw.close();
                }
            }
            if (sync != null) {
                sync.close();
            }
            if (hostPool != null) {
                hostPool.close();
            }
        } finally {
            super.close();
        }
    }
}
