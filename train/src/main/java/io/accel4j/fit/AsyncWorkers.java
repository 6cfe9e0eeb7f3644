package io.accel4j.fit;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.parallel.AsyncWorker;
import io.accel4j.train.parallel.ParameterServers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Asynchronous data parallelism as a rank's strategy ({@link LearnerBuilder#asyncWorkers}): each rank is a worker of
 * {@link ParameterServers} that hold the parameters of record and AdamW's state in shards. Nothing is averaged over
 * the workers: {@link #reduce} does nothing, and the loss, norm, overflow and FP8 amaxes are the worker's own. The
 * optimizer ({@link #optimizer}) pushes the step's gradients (times the clipping's scale) with the step's learning
 * rate to every shard and pulls the parameters once the staleness bound allows ({@link AsyncWorker}: the servers' protocol); it holds no state. Checkpoints go through
 * {@link #serverState()}: the run's rank 0 gathers the servers' shards, a resume gives them back. Worker 0's metrics
 * carry the staleness of the updates applied since its previous step ({@link #stepJson()}).
 */
final class AsyncWorkers implements GradientSync, GradientSync.ServerState {

    /**
     * What {@link LearnerBuilder#asyncWorkers} was given: the servers, the GPT-2 layout they shard and the trainer
     * config whose AdamW they run.
     */
    record Servers(ParameterServers servers, ParameterLayout layout, TrainConfig cfg) {
        Servers {
            Objects.requireNonNull(servers, "servers");
            Objects.requireNonNull(layout, "layout");
            Objects.requireNonNull(cfg, "cfg");
        }

        /** The servers' AdamW as the Java API's spec: the builder's optimizer must say the same. */
        AdamW.Spec adamw() {
            return new AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(),
                    !cfg.decayMatricesOnly() || cfg.weightDecay() == 0);
        }

        /** A one-line description. */
        String describe() {
            return "AdamW on " + servers.servers() + " parameter server" + (servers.servers() == 1 ? "" : "s")
                    + " (" + servers.workers() + " asynchronous worker" + (servers.workers() == 1 ? "" : "s")
                    + ", staleness <= " + servers.staleness() + ")";
        }
    }

    private final Servers config;
    private final AsyncWorker worker;
    private final int workers;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment hostGrads;
    private final MemorySegment hostParams;
    private DeviceMemory memory;
    private MemorySegment params; // the network's, once the optimizer is made
    private boolean connected;

    /**
     * Worker {@code worker} of {@code workers}; the rank's model must have the servers' {@code layout.count()}
     * parameters.
     *
     * @throws IllegalArgumentException when the workers are not the servers' or the model is not their layout's
     */
    AsyncWorkers(Servers config, int worker, int workers, long count) {
        if (workers != config.servers().workers()) {
            throw new IllegalArgumentException("asyncWorkers: the learner has " + workers + " rank"
                    + (workers == 1 ? "" : "s") + ", but the parameter servers wait for " + config.servers().workers()
                    + " workers: one rank per worker");
        }
        if (count != config.layout().count()) {
            throw new IllegalArgumentException("asyncWorkers: the model has " + count + " parameters, but the "
                    + "parameter servers' layout " + config.layout().count() + ": give the model's GPT-2 layout");
        }
        this.config = config;
        this.workers = workers;
        this.worker = new AsyncWorker(config.servers(), worker, config.layout(), config.cfg());
        long bytes = count * Float.BYTES;
        this.hostGrads = arena.allocate(bytes, 64);
        this.hostParams = arena.allocate(bytes, 64);
    }

    @Override
    public int rank() {
        return worker.worker();
    }

    @Override
    public int ranks() {
        return workers;
    }

    /** Nothing: the gradients go to the servers with the update. */
    @Override
    public void reduce(MemorySegment grads, long count) {
    }

    /** The worker's own. */
    @Override
    public double mean(double value) {
        return value;
    }

    /** The worker's own. */
    @Override
    public boolean any(boolean local) {
        return local;
    }

    /** The worker's own. */
    @Override
    public float[] max(float[] values) {
        return values;
    }

    /** The staleness of the updates applied since worker 0's previous step ({@link AsyncWorker#stepJson}). */
    @Override
    public String stepJson() {
        return worker.stepJson();
    }

    /**
     * The optimizer of this worker: {@code spec} (the servers' AdamW, checked by the builder) runs on the servers;
     * each step copies {@code grads} to the host, pushes them and pulls the parameters into {@code params}.
     */
    @Override
    public Optimizer optimizer(OptimizerSpec spec, Ops ops, ParameterTable table, MemorySegment params,
                               MemorySegment grads) {
        this.memory = ops.memory();
        this.params = params;
        return new PushPull(grads);
    }

    @Override
    public ServerState serverState() {
        return this;
    }

    /** Before the first exchange: worker 0 gives the servers the network's parameters as they are now. */
    private void connect() {
        if (!connected) {
            memory.copyToHost(params, hostParams);
            worker.connect(hostParams);
            connected = true;
        }
    }

    /** {@link ServerState#gather}: worker 0 fetches every shard's parameters, m and v. */
    @Override
    public void gather(MemorySegment whole, Map<String, MemorySegment> state) {
        if (worker.worker() != 0) {
            return;
        }
        connect();
        worker.gather(whole, buffer(state, "m"), buffer(state, "v"));
    }

    /** The servers' AdamW state buffer {@code name} of {@code state}. */
    private static MemorySegment buffer(Map<String, MemorySegment> state, String name) {
        MemorySegment b = state.get(name);
        if (b == null) {
            throw new IllegalArgumentException("the optimizer state has no '" + name + "' buffer (the parameter "
                    + "servers' AdamW holds m and v), got " + state.keySet());
        }
        return b;
    }

    /** {@link ServerState#restore}: the clocks become {@code step}; worker 0 gives the shards their state. */
    @Override
    public void restore(MemorySegment whole, Map<String, MemorySegment> state, int step) {
        connected = true;
        worker.restore(whole, buffer(state, "m"), buffer(state, "v"), step);
    }

    @Override
    public void close() {
        worker.done();
        arena.close();
    }

    /** The worker's side of the servers' AdamW: push, pull; no state here. */
    private final class PushPull implements Optimizer {

        private final MemorySegment grads;
        private final Map<String, MemorySegment> none = new LinkedHashMap<>();

        PushPull(MemorySegment grads) {
            this.grads = grads;
            none.put("m", MemorySegment.NULL); // the servers hold them: no bytes here
            none.put("v", MemorySegment.NULL);
        }

        /**
         * {@code t} is the servers' to count (a shard's version); {@code lr} and {@code gradScale} go with the push.
         */
        @Override
        public void step(int t, float lr, float gradScale) {
            connect();
            memory.copyToHost(grads, hostGrads);
            worker.exchange(hostGrads, gradScale, lr, hostParams);
            memory.copyToDevice(hostParams, params);
        }

        /** AdamW's m and v by name, of no bytes: the servers hold them ({@link ServerState}). */
        @Override
        public Map<String, MemorySegment> state() {
            return none;
        }

        @Override
        public DeviceMemory stateMemory() {
            return HostMemory.INSTANCE;
        }

        @Override
        public String describe() {
            return config.describe();
        }

        @Override
        public void close() {
        }
    }
}
