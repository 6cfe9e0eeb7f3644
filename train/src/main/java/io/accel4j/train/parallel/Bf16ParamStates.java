package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.optim.Bf16AdamW;
import io.accel4j.optim.Bf16StoreAdamW;
import io.accel4j.optim.OffloadedBf16AdamW;
import io.accel4j.optim.Optimizer;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * Stage 0 (one rank, or DDP) for a model whose working weights are stored in bf16 ({@link Gpt2#halfParameters()},
 * {@code --bf16-params}): the fp32 master weights and AdamW's moments are this strategy's optimizer
 * ({@link Bf16StoreAdamW}: master, m, v in the model's memory; with {@link #offloaded()} {@link OffloadedBf16AdamW}:
 * in host memory, updated by the host's kernels, the model's memory keeping the bf16 weights and the gradients), which writes the bf16 store with stochastic rounding
 * from the seed {@link #roundingSeed}; the gradients are the model's, fp32 ({@link Gpt2#grads()}, averaged by one
 * all-reduce after backward) or 16-bit ({@link Gpt2#halfGradients()}, an all-reduce per fp32 chunk, as
 * {@link HalfGradStates}).
 *
 * <p>Checkpoints: the llm.c model file is the fp32 master, the state file stage 0's moments (so a checkpoint of a run
 * with bf16 working weights resumes without them and the other way round). A resume sets the master from the model
 * file and the store from the master, rounded as the last update rounded it — stochastically with the seed of update
 * {@code step − skipped} ({@link TrainState.Header}), or to nearest even before the first update — so the bf16 values
 * are the uninterrupted run's, bit for bit.
 */
public final class Bf16ParamStates extends ModelStates {

    private final Bf16AdamW.Spec spec;
    private final boolean offload;
    /** The host backend's pool of an offloaded optimizer on a device backend, else null. */
    private Parallel hostPool;
    /** {@link Bf16StoreAdamW}, or offloaded {@link OffloadedBf16AdamW}. */
    private final Optimizer adamw;
    private final HalfGradients half;
    private final MemorySegment master;
    private final MemorySegment m;
    private final MemorySegment v;
    /** The number of the last update a resume's checkpoint made (0: none), read by {@link #readMoments}. */
    private int lastUpdate;

    Bf16ParamStates(Communicator comm, Gpt2 model, TrainConfig cfg, int values, boolean offload) {
        super(checkStage(comm, cfg), model, values);
        this.half = model.gradientStorage() == DType.FP32 ? null : model.halfGradients();
        this.spec = spec(cfg);
        this.offload = offload;
        try {
            Bf16StoreAdamW.Gradients g = half != null ? Bf16StoreAdamW.Gradients.of(half)
                    : Bf16StoreAdamW.Gradients.of(model.grads());
            this.adamw = offload ? new OffloadedBf16AdamW(spec, model.ops(), hostOps(model.ops()),
                    model.network().table(), model.halfParameters(), g)
                    : new Bf16StoreAdamW(spec, model.ops(), model.network().table(), model.halfParameters(), g);
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
        this.master = adamw.state().get("master");
        this.m = adamw.state().get("m");
        this.v = adamw.state().get("v");
    }

    /**
     * Stage 0 (one rank, or DDP) with bf16 working weights and the master and moments in host memory
     * ({@link OffloadedBf16AdamW}): the model's memory keeps the bf16 parameters and the gradients only.
     */
    public static Factory offloaded() {
        return (comm, model, cfg, values) -> new Bf16ParamStates(comm, model, cfg, values, true);
    }

    private Ops hostOps(Ops ops) {
        if (ops.memory().hostAccessible()) {
            return ops;
        }
        hostPool = new Parallel(Parallel.defaultThreads());
        return new CpuOps(hostPool);
    }

    /** The trainer's AdamW ({@link ModelStates#adamw}'s hyperparameters) rounding with {@link #roundingSeed}. */
    static Bf16AdamW.Spec spec(TrainConfig cfg) {
        boolean decayAll = !cfg.decayMatricesOnly() || cfg.weightDecay() == 0;
        return new Bf16AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(), decayAll,
                roundingSeed(cfg));
    }

    /** The stochastic rounding's seed: the run's {@code --seed}, mixed so that it is not the shuffle's stream. */
    public static long roundingSeed(TrainConfig cfg) {
        return cfg.seed() ^ 0x62663136L; // "bf16"
    }

    private static Communicator checkStage(Communicator comm, TrainConfig cfg) {
        if (cfg.zeroStage() != 0) {
            throw new IllegalArgumentException("--bf16-params does not go with --zero " + cfg.zeroStage()
                    + " yet: its optimizer holds the whole master; drop one of them");
        }
        return comm;
    }

    @Override
    public void reduceGradients() {
        if (comm == null) {
            return;
        }
        if (half != null) {
            half.chunks(0, count, true, (o, f, n) -> comm.allReduce(f, n, DType.FP32, ReduceOp.AVG));
        } else {
            comm.allReduce(model.grads(), count, DType.FP32, ReduceOp.AVG);
        }
    }

    @Override
    public boolean anyNonFinite() {
        boolean local = half != null ? half.hasNonFinite() : model.ops().hasNonFinite(model.grads(), count);
        return exchange == null ? local : exchange.any(local);
    }

    @Override
    public double sumOfSquares() {
        return half != null ? half.sumOfSquares() : model.ops().sumOfSquares(model.grads(), count);
    }

    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        adamw.step(t, decay.lr(), gradScale); // decay's other fields are the spec's, as SyncStates'
    }

    @Override
    public void checkReplicas() {
        if (comm != null) {
            ReplicaCheck.check(exchange, comm.rank(), adamw.stateMemory(), master, count);
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

    /** The master weights and the moments, in the model's memory unless offloaded. */
    @Override
    public long stateBytes() {
        return offload ? 0 : adamw.stateBytes();
    }

    /** Offloaded: the master, the moments and the optimizer's host chunks. */
    @Override
    public long hostBytes() {
        return offload ? adamw.stateBytes() + adamw.hostScratchBytes() : 0;
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

    /** The fp32 master weights. */
    @Override
    public void copyParameters(MemorySegment dst) {
        if (dst != null) {
            adamw.stateMemory().copyToHost(master, dst.asSlice(0, count * Float.BYTES));
        }
    }

    @Override
    public Saved gatherForCheckpoint(Arena staging) {
        boolean root = comm == null || comm.rank() == 0;
        DeviceMemory mem = adamw.stateMemory(); // the host's when offloaded
        return root ? new Saved(mem.readableOnHost(m, staging), mem.readableOnHost(v, staging),
                mem.readableOnHost(master, staging)) : null;
    }

    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        try (Arena staging = Arena.ofConfined()) {
            DeviceMemory mem = adamw.stateMemory();
            MemorySegment hm = mem.writableOnHost(m, staging), hv = mem.writableOnHost(v, staging);
            TrainState.Header h = TrainState.read(stateFile, model.config(), hm, hv);
            mem.writeBack(hm, m);
            mem.writeBack(hv, v);
            lastUpdate = h.step() - h.skippedSteps();
            return h;
        }
    }

    /**
     * The master from {@code host}, and the bf16 store from it rounded as the last update rounded it (see the class
     * comment; {@link #readMoments} tells which update that was).
     */
    @Override
    public void setParameters(MemorySegment host) {
        adamw.stateMemory().copyToDevice(host.asSlice(0, count * Float.BYTES), master);
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment bf16 = staging.allocate(count * 2, 64);
            if (lastUpdate > 0) {
                io.accel4j.cpu.Casts.f32ToBf16Stochastic(bf16, 0, host, 0, count, spec.seed(lastUpdate), 0);
            } else {
                io.accel4j.cpu.Casts.f32ToBf16(bf16, 0, host, 0, count);
            }
            model.halfParameters().load(bf16);
        }
    }

    @Override
    public void gatherModel(boolean here) {
    }

    @Override
    public void close() {
        try {
            if (adamw != null) {
                adamw.close();
            }
        } finally {
            try {
                if (hostPool != null) {
                    hostPool.close();
                }
            } finally {
                super.close();
            }
        }
    }
}
