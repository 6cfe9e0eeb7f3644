package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.Offload;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.precision.LossScaler;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * Stage 0: every rank holds the whole model states — the model's flat parameters and gradients and AdamW's moments —
 * and (several ranks) the gradients are averaged with {@code allReduce(AVG)}: in {@link GradientBuckets} started
 * during the last micro-batch's backward as layers finish (with {@link TrainConfig#bucketBytes} &gt; 0), or in one
 * all-reduce of the whole buffer after it. Every rank then applies the same update to the same bits, so the replicas
 * stay identical. One rank is the same without the collectives.
 */
final class ReplicatedStates extends ModelStates {

    /** AdamW over the model's table: decay on the matrices only, or on everything ({@link TrainConfig}). */
    private final Optimizer adamw;
    private final MemorySegment m;
    private final MemorySegment v;
    /** Whether AdamW runs on the host ({@link Offload}); its pool when the model's backend is not the host's. */
    private final boolean offload;
    private Parallel hostPool;

    ReplicatedStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload) {
        super(comm, model, values);
        this.offload = offload;
        boolean decayAll = !cfg.decayMatricesOnly() || cfg.weightDecay() == 0;
        try {
            OptimizerSpec spec = new AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(), decayAll);
            if (offload) {
                spec = new Offload(spec, hostOps(model.ops()));
            }
            this.adamw = spec.create(model.ops(), model.network().table(), model.params(), model.grads());
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
        this.m = adamw.state().get("m");
        this.v = adamw.state().get("v");
        overlapAllReduce(cfg.bucketBytes());
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
    public void reduceGradients() {
        if (bucketed()) {
            finishBuckets();
        } else if (comm != null) {
            comm.allReduce(model.grads(), count, DType.FP32, ReduceOp.AVG);
        }
    }

    @Override
    public boolean anyNonFinite() {
        return LossScaler.overflowed(model.ops(), model.grads(), count, exchange);
    }

    @Override
    public double sumOfSquares() {
        return model.ops().sumOfSquares(model.grads(), count);
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        adamw.step(t, decay.lr(), gradScale); // decay's other fields are the spec's: one launch on a GPU
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
        if (comm != null && comm.rank() != 0) {
            return null; // every rank holds the same states: rank 0 writes them
        }
        DeviceMemory mem = adamw.stateMemory();
        return new Saved(mem.readableOnHost(m, staging), mem.readableOnHost(v, staging), null);
    }

    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        try (Arena staging = Arena.ofConfined()) {
            DeviceMemory mem = adamw.stateMemory();
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
        adamw.parametersReplaced();
    }

    @Override
    public void gatherModel(boolean here) {
    }

    @Override
    public void close() {
        if (adamw != null) {
            adamw.close();
        }
        if (hostPool != null) {
            hostPool.close();
        }
        super.close();
    }
}
