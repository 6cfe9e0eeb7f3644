package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
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
 * Stage 0 (one rank, or DDP) for a model whose gradients are stored in 16 bits ({@link Gpt2#halfGradients()},
 * {@code --grad-storage bf16|fp16}): every consumer of the gradients reads them in fp32 chunks of at most
 * {@link HalfGradients#CHUNK} elements ({@link HalfGradients#chunks}), so no second, fp32 gradient buffer exists. The
 * average over the ranks is an all-reduce per chunk after backward (widened, averaged in fp32, rounded back into the
 * store; no buckets overlapped with backward); the overflow check and the norm are the chunks' (the norm's sum in
 * double over the chunks in order); AdamW ({@code optim.HalfGradAdamW}, its moments fp32 as {@link SyncStates}')
 * runs once per chunk of each decay range, each element updated exactly as the whole-vector kernel updates it from
 * the same fp32 gradient.
 * Checkpoints are stage 0's: the moments whole, so a run resumes with either gradient storage.
 */
final class HalfGradStates extends ModelStates {

    private final HalfGradients grads;
    /** AdamW over the 16-bit gradients: decay on the matrices only, or on everything ({@link TrainConfig}). */
    private final Optimizer adamw;
    private final MemorySegment m;
    private final MemorySegment v;

    HalfGradStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values) {
        super(checkStage(comm, cfg), model, values);
        this.grads = model.halfGradients();
        try {
            this.adamw = adamw(cfg).create(model.ops(), model.network().table(), model.params(), grads);
        } catch (RuntimeException | Error e) {
            super.close();
            throw e;
        }
        this.m = adamw.state().get("m");
        this.v = adamw.state().get("v");
    }

    private static Communicator checkStage(Communicator comm, TrainConfig cfg) {
        if (cfg.zeroStage() != 0) {
            throw new IllegalArgumentException("--grad-storage " + cfg.precision().gradients().name()
                    .toLowerCase(java.util.Locale.ROOT) + " does not go with --zero " + cfg.zeroStage()
                    + " yet: ZeRO's stages keep fp32 gradients; drop one of them");
        }
        return comm;
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
    }

    @Override
    public void checkReplicas() {
        if (comm != null) {
            ReplicaCheck.check(exchange, comm.rank(), memory, model.params(), count);
        }
    }

    @Override
    public boolean shardsParameters() {
        return false;
    }

    @Override
    public int zeroStage() {
        return 0;
    }

    @Override
    public long stateBytes() {
        return momentBytes();
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
        return ZeroMemory.fp32(0, ranks(), count);
    }

    @Override
    public void copyParameters(MemorySegment dst) {
        if (dst != null) {
            model.copyParamsToHost(dst);
        }
    }

    @Override
    public Saved gatherForCheckpoint(Arena staging) {
        boolean root = comm == null || comm.rank() == 0;
        return root ? new Saved(memory.readableOnHost(m, staging), memory.readableOnHost(v, staging), null) : null;
    }

    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        try (Arena staging = Arena.ofConfined()) {
            DeviceMemory mem = memory;
            MemorySegment hm = mem.writableOnHost(m, staging), hv = mem.writableOnHost(v, staging);
            TrainState.Header h = TrainState.read(stateFile, model.config(), hm, hv);
            mem.writeBack(hm, m);
            mem.writeBack(hv, v);
            return h;
        }
    }

    @Override
    public void setParameters(MemorySegment host) {
        model.copyParamsFromHost(host);
    }

    @Override
    public void gatherModel(boolean here) {
    }

    @Override
    public void close() {
        try {
            adamw.close();
        } finally {
            super.close();
        }
    }
}
