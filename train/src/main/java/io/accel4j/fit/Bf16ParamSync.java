package io.accel4j.fit;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.nn.HalfParameters;
import io.accel4j.nn.Network;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.Bf16AdamW;
import io.accel4j.optim.Bf16StoreAdamW;
import io.accel4j.optim.Offload;
import io.accel4j.optim.OffloadedBf16AdamW;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Objects;

/**
 * One rank or DDP ({@code inner}: {@link GradientSync#local()}, {@link DataParallel}, bucketed or not, or
 * {@link HalfGradientSync} over them) for a network whose working weights are stored in bf16
 * ({@link LearnerBuilder#parameterStorage}, {@link Network#halfParameters()}): {@code accel4j train
 * --bf16-params}. The reduction, the norm and the overflow check are {@code inner}'s; the optimizer is
 * AdamW over the fp32 master weights writing the store with stochastic rounding — {@link Bf16StoreAdamW} (master, m,
 * v in the network's memory) or, for an {@link Offload}ed spec, {@link OffloadedBf16AdamW} on its host backend
 * (master, m, v in host memory) — reading the gradients as fp32 (the flat buffer, or the 16-bit store's chunks).
 *
 * <p>The learner's parameters are the fp32 master: {@link #copyParameters} gives it (a checkpoint's model, the
 * whole parameters), {@link #resumeParameters} sets it and the store from it rounded as the last update rounded it
 * (stochastically with the seed of update {@code updates}, or to nearest even before the first), so a resumed run is
 * the uninterrupted one bit for bit; {@link #setParameters} (initial weights) rounds them into the store to nearest
 * even and the master takes the store's values, as the trainer's optimizer starts. The optimizer the rank sees holds
 * m and v as its state (the master being these parameters), so a checkpoint's files are the trainer's.
 */
final class Bf16ParamSync extends ForwardingGradientSync {

    /** Mixed into the run's seed for the stochastic rounding's ("bf16"), as the trainer mixes its {@code --seed}. */
    static final long ROUNDING = 0x62663136L;

    private final Network net;
    private final long seed;
    /** {@link Bf16StoreAdamW} or {@link OffloadedBf16AdamW}, once {@link #optimizer} made it. */
    private Optimizer adamw;
    private Bf16AdamW.Spec spec;

    /**
     * {@code inner} over {@code net}'s bf16 working weights, an {@link AdamW.Spec}'s rounding seed drawn from
     * {@code seed} ({@code seed ^ }{@link #ROUNDING}).
     *
     * @throws IllegalArgumentException when {@code inner} shards (ZeRO): the optimizer holds the whole master
     */
    Bf16ParamSync(GradientSync inner, Network net, long seed) {
        super(inner);
        this.net = Objects.requireNonNull(net, "net");
        this.seed = seed;
        long count = net.table().count();
        if (inner.shard(count).length() != count) {
            throw new IllegalArgumentException("bf16 working weights (parameterStorage) do not go with "
                    + inner.getClass().getSimpleName() + "'s shards yet: the optimizer holds the whole master");
        }
        net.halfParameters(); // refuses a network of fp32 parameters
    }

    @Override
    public Shard shard(long count) {
        return inner.shard(count);
    }

    @Override
    public void reduce(MemorySegment grads, long count) {
        inner.reduce(grads, count);
    }

    @Override
    public java.util.function.IntConsumer gradientsDone() {
        return inner.gradientsDone();
    }

    @Override
    public void abandon(Throwable failure) {
        inner.abandon(failure);
    }

    @Override
    public MemorySegment gradients(MemorySegment grads, long count) {
        return inner.gradients(grads, count);
    }

    @Override
    public double sumOfSquares(io.accel4j.core.ops.Ops ops, MemorySegment grads, long count) {
        return inner.sumOfSquares(ops, grads, count);
    }

    @Override
    public boolean anyNonFinite(io.accel4j.core.ops.Ops ops, MemorySegment grads, long count) {
        return inner.anyNonFinite(ops, grads, count);
    }

    /** The bf16 AdamW of {@code spec} (an {@link AdamW.Spec} or {@link Bf16AdamW.Spec}, {@link Offload}ed or not). */
    static Bf16AdamW.Spec spec(OptimizerSpec spec, long seed) {
        OptimizerSpec s = spec instanceof Offload o ? o.inner() : spec;
        if (s instanceof Bf16AdamW.Spec b) {
            return b;
        }
        if (s instanceof AdamW.Spec a) {
            return new Bf16AdamW.Spec(a.beta1(), a.beta2(), a.eps(), a.weightDecay(), a.decayAll(), seed ^ ROUNDING);
        }
        throw new IllegalArgumentException("bf16 working weights (parameterStorage) are written by AdamW, got "
                + s.getClass().getName());
    }

    @Override
    public Optimizer optimizer(OptimizerSpec requested, Network n) {
        if (n != net) {
            throw new IllegalArgumentException("this strategy writes the bf16 store of the network it was made for");
        }
        if (adamw != null) {
            throw new IllegalStateException("the bf16 working weights have their optimizer already");
        }
        spec = spec(requested, seed);
        Bf16StoreAdamW.Gradients g = net.gradientStorage() == DType.FP32 ? Bf16StoreAdamW.Gradients.of(net.grads())
                : Bf16StoreAdamW.Gradients.of(net.halfGradients());
        HalfParameters store = net.halfParameters();
        adamw = requested instanceof Offload o
                ? new OffloadedBf16AdamW(spec, net.ops(), o.host(), net.table(), store, g)
                : new Bf16StoreAdamW(spec, net.ops(), net.table(), store, g);
        return new Moments(adamw);
    }

    /** Initial weights: the store takes them rounded to nearest even, the master (once made) the store's values. */
    @Override
    public void setParameters(Network n, MemorySegment host) {
        n.copyParamsFromHost(host);
        if (adamw != null) {
            long count = n.table().count();
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment widened = staging.allocate(count * Float.BYTES, 64);
                n.halfParameters().readToHost(widened);
                adamw.stateMemory().copyToDevice(widened, master());
            }
        }
    }

    /**
     * A checkpoint's fp32 master {@code host} after {@code updates} updates: the master exactly, the store rounded
     * from it as update {@code updates} rounded it (to nearest even when there was none).
     */
    @Override
    public void resumeParameters(Network n, MemorySegment host, int updates) {
        long count = n.table().count();
        MemorySegment master = master();
        adamw.stateMemory().copyToDevice(host.asSlice(0, count * Float.BYTES), master);
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment bf16 = staging.allocate(count * 2, 64);
            if (updates > 0) {
                io.accel4j.cpu.Casts.f32ToBf16Stochastic(bf16, 0, host, 0, count, spec.seed(updates), 0);
            } else {
                io.accel4j.cpu.Casts.f32ToBf16(bf16, 0, host, 0, count);
            }
            n.halfParameters().load(bf16);
        }
    }

    /** The fp32 master weights into {@code host}. */
    @Override
    public void copyParameters(Network n, MemorySegment host) {
        long count = n.table().count();
        MemorySegment master = master();
        adamw.stateMemory().copyToHost(master, host.asSlice(0, count * Float.BYTES));
    }

    private MemorySegment master() {
        if (adamw == null) {
            throw new IllegalStateException("the fp32 master is the optimizer's: make it first (optimizer(spec, net))");
        }
        return adamw.state().get("master");
    }

    /**
     * The bf16 optimizer as the rank sees it: its steps and description, its state m and v (the master is the
     * learner's parameters: {@link #copyParameters}, {@link #resumeParameters}).
     */
    private static final class Moments implements Optimizer {
        private final Optimizer adamw;
        private final Map<String, MemorySegment> state;

        Moments(Optimizer adamw) {
            this.adamw = adamw;
            Map<String, MemorySegment> s = new java.util.LinkedHashMap<>();
            s.put("m", adamw.state().get("m"));
            s.put("v", adamw.state().get("v"));
            this.state = java.util.Collections.unmodifiableMap(s);
        }

        @Override
        public void step(int t, float lr, float gradScale) {
            adamw.step(t, lr, gradScale);
        }

        /** m, then v. */
        @Override
        public Map<String, MemorySegment> state() {
            return state;
        }

        @Override
        public DeviceMemory stateMemory() {
            return adamw.stateMemory();
        }

        /** master, m and v, as allocated. */
        @Override
        public long stateBytes() {
            return adamw.stateBytes();
        }

        @Override
        public long hostScratchBytes() {
            return adamw.hostScratchBytes();
        }

        @Override
        public String describe() {
            return adamw.describe();
        }

        @Override
        public void close() {
            adamw.close();
        }
    }
}
