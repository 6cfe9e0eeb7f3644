package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.optim.Offload;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.nn.HalfGradients;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * Stage 0 (one rank, or DDP) and ZeRO-1 for a model whose gradients are stored in 16 bits ({@link
 * Gpt2#halfGradients()}, {@code --grad-storage bf16|fp16}): every consumer of the gradients reads them in fp32 chunks
 * of at most {@link HalfGradients#CHUNK} elements ({@link HalfGradients#chunks}), so no second, fp32 gradient buffer
 * exists. The average over the ranks is an all-reduce per chunk after backward (widened, averaged in fp32, rounded
 * back into the store; no buckets overlapped with backward); the overflow check and the norm are the chunks' (the
 * norm's sum in double over the chunks in order); AdamW ({@code optim.HalfGradAdamW}, its moments fp32 as {@link
 * SyncStates}') runs once per chunk of each decay range, each element updated exactly as the whole-vector kernel
 * updates it from the same fp32 gradient.
 *
 * <p>ZeRO-1 ({@code --zero 1}) is the same all-reduce, so every rank holds the whole averaged 16-bit gradients, their
 * norm and overflow flag the same bits as DDP's; AdamW's moments are rank r's chunk of the vector only
 * ({@link Chunks}, as {@code fit.ZeroSharding}'s), updated from the fp32-widened chunks of the store at their offsets,
 * then an in-place all-gather gives every rank the others' updated parameters: bit for bit DDP over 16-bit
 * gradients. (A reduce-scatter would halve the gradients' traffic, but each rank would then see only its shard of
 * them, and the norm, summed over other chunk boundaries, would no longer be DDP's bits.)
 *
 * <p>Checkpoints hold the moments whole, so a run resumes with either gradient storage and at either stage: under
 * ZeRO-1 rank 0 collects each rank's chunk, broadcast from it piece by piece through the gradients' fp32 working
 * region ({@link HalfGradients#idleWorkingRegion}, free between steps), and {@link #readMoments} reads this rank's
 * chunk back.
 *
 * <p>With {@code offload} (stage 0 only, {@code --offload-optimizer}) AdamW runs on the host ({@link Offload}): each
 * step the store is widened chunk by chunk on the device and the fp32 chunks copied into the host's landing buffer,
 * where the CPU kernels update an fp32 master copy and the moments, and the parameters go back up; the device then
 * holds parameters, 16-bit gradients and activations only.
 */
final class HalfGradStates extends ModelStates {

    private final int stage;
    private final HalfGradients grads;
    /** This rank's elements of the vector: all of them at stage 0, chunk r at stage 1. */
    private final long shardOffset;
    private final long shardLength;
    /** AdamW over the 16-bit gradients: decay on the matrices only, or on everything ({@link TrainConfig}). */
    private final Optimizer adamw;
    private final MemorySegment m;
    private final MemorySegment v;
    /** Whether AdamW runs on the host ({@link Offload}); its pool when the model's backend is not the host's. */
    private final boolean offload;
    private Parallel hostPool;

    HalfGradStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values) {
        this(comm, model, cfg, values, false);
    }

    /** With {@code offload}: AdamW on the host ({@link Offload}), stage 0 only. */
    HalfGradStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload) {
        this(comm, model, cfg, values, offload, true);
    }

    /** With {@code offload}, its step overlapped or not ({@link Offload#overlap()}). */
    HalfGradStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload, boolean overlap) {
        super(checkStage(comm, cfg, offload), model, values);
        this.offload = offload;
        this.stage = cfg.zeroStage();
        this.grads = model.halfGradients();
        int n = comm == null ? 1 : comm.size(), r = comm == null ? 0 : comm.rank();
        this.shardOffset = stage == 0 ? 0 : Chunks.start(count, n, r);
        this.shardLength = stage == 0 ? count : Chunks.length(count, n, r);
        try {
            OptimizerSpec spec = offload ? new Offload(adamw(cfg), hostOps(model.ops()), overlap) : adamw(cfg);
            this.adamw = spec.create(model.ops(), model.network().table(), slice(model.params(), shardOffset,
                    shardLength), grads, shardOffset, shardLength);
        } catch (RuntimeException | Error e) {
            if (hostPool != null) {
                hostPool.close();
            }
            super.close();
            throw e;
        }
        if (offload) { // the upload overlaps the next forward, unit by unit (stage 0: the whole vector)
            DeferredUpload.wire(adamw, model);
        }
        this.m = adamw.state().get("m");
        this.v = adamw.state().get("v");
    }

    /** The model's backend when it computes in host memory (the CPU's), else the Vector API on a pool of its own. */
    private Ops hostOps(Ops ops) {
        if (ops.memory().hostAccessible()) {
            return ops;
        }
        hostPool = new Parallel(Parallel.defaultThreads());
        return new CpuOps(hostPool);
    }

    private static Communicator checkStage(Communicator comm, TrainConfig cfg, boolean offload) {
        if (offload && cfg.zeroStage() != 0) {
            throw new IllegalArgumentException("the offloaded optimizer does not go with ZeRO stage "
                    + cfg.zeroStage() + " in the trainer yet");
        }
        if (cfg.zeroStage() > 1) {
            throw new IllegalArgumentException("--grad-storage " + cfg.precision().gradients().name()
                    .toLowerCase(java.util.Locale.ROOT) + " does not go with --zero " + cfg.zeroStage()
                    + " yet: ZeRO-2/3 keep fp32 gradient shards; drop one of them");
        }
        if (cfg.zeroStage() == 1 && (comm == null || comm.size() < 2)) {
            throw new IllegalArgumentException("ZeRO stage 1 shards over the ranks: it needs a communicator of more "
                    + "than one rank (got 1)");
        }
        return comm;
    }

    private static MemorySegment slice(MemorySegment s, long offset, long n) {
        return s.asSlice(offset * Float.BYTES, n * Float.BYTES);
    }

    @Override
    public void reduceGradients() {
        if (comm != null) {
            grads.chunks(0, count, true, (o, f, n) -> comm.allReduce(f, n, DType.FP32, ReduceOp.AVG));
        }
    }

    @Override
    public boolean anyNonFinite() {
        boolean local = grads.hasNonFinite();
        return exchange == null ? local : exchange.any(local);
    }

    @Override
    public double sumOfSquares() {
        return grads.sumOfSquares();
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        adamw.step(t, decay.lr(), gradScale); // decay's other fields are the spec's, as SyncStates'
        if (stage == 1) { // in place: this rank's chunk is already there
            comm.allGather(slice(model.params(), shardOffset, shardLength), model.params(), count, DType.FP32);
        }
    }

    @Override
    public void checkReplicas() {
        if (comm != null) {
            adamw.awaitParameters(); // every reader but a unit's forward waits for a deferred upload
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
    public long stateBytes() {
        return offload ? 0 : momentBytes();
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
        if (stage == 0) {
            DeviceMemory mem = adamw.stateMemory(); // the host's when offloaded
            return root ? new Saved(mem.readableOnHost(m, staging), mem.readableOnHost(v, staging), null) : null;
        }
        MemorySegment hm = root ? staging.allocate(count * Float.BYTES, 64) : null;
        MemorySegment hv = root ? staging.allocate(count * Float.BYTES, 64) : null;
        gather(m, hm);
        gather(v, hv);
        return root ? new Saved(hm, hv, null) : null;
    }

    /**
     * A collective: {@code host} (rank 0's, else null) receives every rank's chunk of a moment ({@code mine}, this
     * rank's), each broadcast from its rank in pieces as large as the gradients' idle fp32 working region.
     */
    private void gather(MemorySegment mine, MemorySegment host) {
        MemorySegment spare = grads.idleWorkingRegion();
        long room = spare.byteSize() / Float.BYTES;
        if (room == 0) {
            throw new IllegalStateException("the 16-bit gradients have no fp32 working region to gather through");
        }
        int n = comm.size();
        for (int r = 0; r < n; r++) {
            long start = Chunks.start(count, n, r), length = Chunks.length(count, n, r);
            for (long d = 0; d < length; d += room) {
                long k = Math.min(room, length - d);
                MemorySegment buf = comm.rank() == r ? slice(mine, d, k) : slice(spare, 0, k);
                comm.broadcast(buf, k, DType.FP32, r);
                if (host != null) {
                    memory.copyToHost(buf, slice(host, start + d, k));
                }
            }
        }
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
                    : TrainState.read(stateFile, model.config(), hm, hv, shardOffset, shardLength);
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
            if (offload) {
                DeferredUpload.unwire(model);
            }
            try {
                adamw.awaitParameters(); // the model's parameters complete for whoever reads them after
            } finally {
                adamw.close();
            }
            if (hostPool != null) {
                hostPool.close();
            }
        } finally {
            super.close();
        }
    }
}
