package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.Fp8State;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Objects;

/**
 * A module tree made trainable: its parameters in one flat fp32 buffer and their gradients in another
 * ({@link ParameterTable}), its activations in one allocation laid out by the {@link ActivationPlan} computed from the
 * tree, all in the backend's memory and allocated once; the input and target buffers; and the loss
 * ({@link SoftmaxCrossEntropy}) over the tree's output. A step is {@link #zeroGrad} then {@link #forwardBackward}
 * (backward adds into the gradients, so micro-batches accumulate); {@link #forward} alone evaluates.
 *
 * <p>Inputs are token ids ({@link NetworkSpec#tokens}, int32, one per position, checked on the host to be in [0, V)) or
 * feature vectors ({@link NetworkSpec#features}, fp32, D per position); targets are int32 class ids, one per position, in
 * [0, classes). A model of independent examples uses T = 1. Not thread-safe.
 */
public final class Network implements AutoCloseable {

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;


    /** A backend for planning only: its attention takes anything, and nothing may run on it. */
    static final Ops PLANNING = (Ops) java.lang.reflect.Proxy.newProxyInstance(Ops.class.getClassLoader(),
            new Class<?>[] {Ops.class}, (proxy, method, args) -> {
                if (method.getName().equals("checkAttention")) {
                    return null;
                }
                throw new UnsupportedOperationException("planning only: " + method.getName());
            });

    /** A spec for a network whose body is {@code body}. */
    public static NetworkSpec of(Module body) {
        return new NetworkSpec(body);
    }

    private enum State { EMPTY, FORWARD, FORWARD_WITH_TARGETS, BACKWARD }

    private final Module body;
    private final Loss loss;
    private final TensorParallel tensor;
    private final java.util.Map<String, Sharding> shardings;
    private final ParameterTable.Order order;
    private final Ops ops;
    private final DeviceMemory memory;
    private final ParameterTable table;
    private final ActivationPlan plan;
    private final int inWidth;
    private final int outWidth;
    private final int vocabulary;
    private final int maxB;
    private final int maxT;
    private final DType operands;
    private final DeviceArena arena;
    private final MemorySegment params;
    private final MemorySegment grads;
    private final MemorySegment acts;
    private final MemorySegment inputs;
    private final MemorySegment targets;
    private final ActRef logits;
    private final ActRef losses;
    private final Pass pass;
    private final Fp8State fp8;
    private final DType attention;
    /** The 16-bit gradients ({@link NetworkSpec#gradientStorage}), or null: fp32 ones in {@link #grads}. */
    private final HalfGradientSource half;
    private final DType gradientStorage;
    /** The bf16 working weights ({@link NetworkSpec#parameterStorage}), or null: fp32 ones in {@link #params}. */
    private final HalfParameterSource bf16;
    private State state = State.EMPTY;

    Network(NetworkSpec s, Ops ops) {
        this.body = s.body;
        this.ops = Objects.requireNonNull(ops, "ops");
        this.memory = ops.memory();
        this.inWidth = s.inWidth;
        this.vocabulary = s.vocabulary;
        this.maxB = s.maxB;
        this.maxT = s.maxT;
        this.operands = s.operands;
        Builder b = new Builder(ops, s.operands, s.fp8 != null, s.recompute, s.maxB, s.maxT);
        b.storage(s.storage);
        this.tensor = TensorParallel.over(s.tensor, memory);
        b.tensor(tensor);
        this.outWidth = b.child(body, inWidth, false);
        this.loss = Loss.of(b, outWidth, s.classes);
        this.shardings = java.util.Map.copyOf(b.shardings());
        this.order = s.order;
        this.attention = b.attentionTaken() == null ? DType.FP32 : b.attentionTaken();
        this.logits = b.activation("logits", outWidth);
        this.losses = b.activation("losses", 1);
        b.declareStores();
        this.table = new ParameterTable(b.params(), s.order);
        this.gradientStorage = s.gradients;
        boolean sixteen = s.gradients != DType.FP32;
        boolean bf16Params = s.parameters != DType.FP32;
        if (sixteen) { // refused here, before anything is allocated, when no unit can take them
            HalfGradientSource.bytes(table, b.declaredUnits(), b.fullUnits());
        }
        if (bf16Params) {
            HalfParameterSource.bytes(table, b.declaredUnits(), b.fullUnits());
        }
        long maxRows = (long) s.maxB * s.maxT;
        this.plan = b.activations().plan(maxRows);
        this.arena = memory.arena();
        try {
            params = s.source == null && !bf16Params ? arena.allocate(table.fp32Bytes()) : null;
            grads = s.source == null && !sixteen ? arena.allocate(table.fp32Bytes()) : null;
            acts = arena.allocate(plan.bytes());
            inputs = arena.allocate(Math.multiplyExact(maxRows, (long) inWidth * Float.BYTES));
            targets = arena.allocate(Math.multiplyExact(maxRows, (long) Integer.BYTES));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        List<ActivationPlan.Region> regions = plan.regions();
        long[] actOff = new long[regions.size()];
        for (int i = 0; i < actOff.length; i++) {
            actOff[i] = regions.get(i).offset();
        }
        this.fp8 = s.fp8 == null || b.fp8Slots() == 0 ? null : Fp8State.forLinears(s.fp8, b.fp8Slots(), ops);
        ParameterSource src;
        Units units;
        HalfGradientSource h = null;
        HalfParameterSource p = null;
        try {
            if (sixteen) {
                h = new HalfGradientSource(ops, s.gradients, table, b.declaredUnits(), b.fullUnits(), params);
            }
            if (bf16Params) {
                p = new HalfParameterSource(ops, table, b.declaredUnits(), b.fullUnits(), grads, h);
                src = p;
                units = p;
            } else if (sixteen) {
                src = h;
                units = h;
            } else {
                src = s.source == null ? ParameterSource.flat(table, params, grads) : s.source.apply(table);
                units = s.units;
            }
        } catch (RuntimeException | Error e) {
            if (h != null) {
                h.close();
            }
            arena.close();
            throw e;
        }
        this.half = h;
        this.bf16 = p;
        this.pass = new Pass(ops, src, units, acts, actOff, s.operands, fp8);
    }

    /** Where each parameter tensor lives in {@link #params()} and {@link #grads()}. */
    public ParameterTable table() {
        return table;
    }

    /** The tensor-parallel group the network is split over ({@link TensorParallel#NONE}: not split). */
    public TensorParallel tensor() {
        return tensor;
    }

    /** How parameter tensor {@code name} is split over the tensor-parallel group ({@link Sharding#REPLICATED}: whole). */
    public Sharding sharding(String name) {
        return shardings.getOrDefault(name, Sharding.REPLICATED);
    }

    /** How the parameter tensors are ordered in the flat buffer. */
    ParameterTable.Order order() {
        return order;
    }

    /** The activation layout. */
    public ActivationPlan plan() {
        return plan;
    }

    /** The module tree. */
    public Module body() {
        return body;
    }

    /** The backend. */
    public Ops ops() {
        return ops;
    }

    /** The backend's memory, which holds every buffer of the network. */
    public DeviceMemory memory() {
        return memory;
    }

    /** The matmuls' operand precision. */
    public DType matmulOperands() {
        return operands;
    }

    /** The linear layers' FP8 state (their amax histories and scales), or null without FP8. */
    public Fp8State fp8() {
        return fp8;
    }

    /**
     * The precision of attention's products: BF16 when the matmuls' operands are BF16 and the backend took BF16
     * attention for every attention module, FP32 otherwise.
     */
    public DType attentionOperands() {
        return attention;
    }

    /** The most sequences per batch. */
    public int maxB() {
        return maxB;
    }

    /** The longest sequence. */
    public int maxT() {
        return maxT;
    }

    /** Values per position of the input (1 for token ids). */
    public int inputWidth() {
        return inWidth;
    }

    /** The loss's number of classes. */
    public int classes() {
        return loss.classes();
    }

    /**
     * The parameters: {@code table().count()} fp32 in the backend's memory.
     *
     * @throws IllegalStateException when they are stored in bf16 ({@link #halfParameters()}) or a source holds them
     */
    public MemorySegment params() {
        if (bf16 != null) {
            throw new IllegalStateException("this network's working weights are stored in bf16 "
                    + "(NetworkSpec.parameterStorage): there is no fp32 parameter vector; read them through "
                    + "halfParameters() or copyParamsToHost");
        }
        return owned(params);
    }

    /** How the working weights are stored: FP32 ({@link #params()}), or BF16 ({@link #halfParameters()}). */
    public DType parameterStorage() {
        return bf16 != null ? DType.BF16 : DType.FP32;
    }

    /**
     * The bf16 working weights of a network built with {@link NetworkSpec#parameterStorage} BF16, which its optimizer
     * writes ({@code optim.Bf16StoreAdamW}).
     *
     * @throws IllegalStateException when the parameters are fp32
     */
    public HalfParameters halfParameters() {
        if (bf16 == null) {
            throw new IllegalStateException("this network's parameters are fp32: params()");
        }
        return bf16.store();
    }

    /**
     * Whether the parameters are this network's own (its flat fp32 buffer or its bf16 store) and the gradients its
     * own buffer or 16-bit store, not a parameter source's of its owner (ZeRO's sharded weights).
     */
    public boolean ownsParameters() {
        return params != null || bf16 != null;
    }

    /** The gradients, laid out as {@link #params()} (fp32 storage only: see {@link #halfGradients()}). */
    public MemorySegment grads() {
        if (half != null) {
            throw new IllegalStateException("this network's gradients are stored in " + gradientStorage
                    + " (NetworkSpec.gradientStorage): read them through halfGradients()");
        }
        return owned(grads);
    }

    /** How the gradients are stored: FP32 ({@link #grads()}), or BF16/FP16 ({@link #halfGradients()}). */
    public DType gradientStorage() {
        return gradientStorage;
    }

    /**
     * The 16-bit gradients of a network built with {@link NetworkSpec#gradientStorage} BF16 or FP16.
     *
     * @throws IllegalStateException when the gradients are fp32
     */
    public HalfGradients halfGradients() {
        if (half == null) {
            throw new IllegalStateException("this network's gradients are fp32: grads()");
        }
        return half.gradients();
    }

    private MemorySegment owned(MemorySegment s) {
        if (s == null) {
            throw new IllegalStateException("this network's parameters come from a parameter source of its owner");
        }
        return s;
    }

    /** Bytes of the parameters (the gradients take as many again). */
    public long parameterBytes() {
        return table.fp32Bytes();
    }

    /** Bytes of the activations (the plan) and of the input and target buffers. */
    public long activationBytes() {
        return plan.bytes() + inputs.byteSize() + targets.byteSize();
    }

    /**
     * Every byte this network allocated: parameters and gradients (unless a source holds them; 16-bit ones:
     * {@link HalfGradients#bytes()}), activations.
     */
    public long totalBytes() {
        if (bf16 != null) { // the bf16 store and the gradients
            return bf16.bytes() + activationBytes();
        }
        long g = half != null ? half.gradients().bytes() : parameterBytes();
        return (params == null ? 0 : parameterBytes() + g) + activationBytes();
    }

    /** Sets every parameter from its {@link Init}, drawing from streams seeded by {@code seed} and its name. */
    public void initialise(long seed) {
        if (bf16 != null) { // drawn on the host, rounded into the store
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment host = staging.allocate(table.fp32Bytes(), 64);
                initialValues(seed, host);
                copyParamsFromHost(host);
            }
            return;
        }
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment host = memory.writableOnHost(params(), staging);
            initialValues(seed, host);
            memory.writeBack(host, params);
        }
    }

    /**
     * What {@link #initialise} sets, into {@code host} ({@code table().count()} fp32): for a network whose parameters
     * a source holds, which takes them from there.
     */
    public void initialValues(long seed, MemorySegment host) {
        checkHost(host);
        try (Arena staging = Arena.ofConfined()) {
            for (ParameterTable.Entry e : table.entries()) {
                MemorySegment dst = host.asSlice(e.offset() * Float.BYTES, e.count() * Float.BYTES);
                Sharding sh = sharding(e.name());
                if (sh.replicated()) {
                    e.init().fill(dst, e.count(), e.name(), seed);
                } else { // drawn whole, as one rank would, then this rank's shard taken
                    long whole = e.count() * tensor.size();
                    MemorySegment all = staging.allocate(whole * Float.BYTES, 64);
                    e.init().fill(all, whole, e.name(), seed);
                    sh.extract(all, dst, e.dims(), tensor.rank(), tensor.size());
                }
            }
        }
    }

    /**
     * Sets the parameters from {@code host} ({@code table().count()} fp32, native order); bf16 working weights
     * ({@link #halfParameters()}) take them rounded to nearest even.
     */
    public void copyParamsFromHost(MemorySegment host) {
        checkHost(host);
        if (bf16 != null) {
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment h = staging.allocate(table.count() * 2, 64);
                io.accel4j.cpu.Casts.f32ToBf16(h, 0, host, 0, table.count());
                bf16.store().load(h);
            }
            return;
        }
        memory.copyToDevice(host.asSlice(0, table.fp32Bytes()), params());
    }

    /** Copies the gradients into {@code host} ({@code table().count()} fp32). */
    public void copyGradsToHost(MemorySegment host) {
        checkHost(host);
        memory.copyToHost(grads(), host.asSlice(0, table.fp32Bytes()));
    }

    /** The vocabulary of a token network (inputs are ids in [0, V)), or −1 for a network of features. */
    public int vocabulary() {
        return vocabulary;
    }

    /** Copies the parameters into {@code host} (bf16 working weights widened: the values the kernels read). */
    public void copyParamsToHost(MemorySegment host) {
        checkHost(host);
        if (bf16 != null) {
            bf16.store().readToHost(host);
            return;
        }
        memory.copyToHost(params(), host.asSlice(0, table.fp32Bytes()));
    }

    private void checkHost(MemorySegment host) {
        if (host.byteSize() < table.fp32Bytes()) {
            throw new IllegalArgumentException("host has " + host.byteSize() + " bytes, the " + table.count()
                    + " fp32 parameters need " + table.fp32Bytes());
        }
    }

    /** Whether the parameters and gradients are this network's two flat buffers, not a parameter source's. */
    public boolean flat() {
        return params != null;
    }

    /** Zeroes the gradients (a parameter source's: starts its accumulation); backward adds into them. */
    public void zeroGrad() {
        if (bf16 != null) {
            bf16.zeroGrad();
        } else if (half != null) {
            half.zeroGrad();
        } else if (params == null) {
            pass.units().zeroGrad();
        } else {
            memory.zero(grads());
        }
    }

    /**
     * The forward over B sequences of T positions ({@code inputs}: host memory, B·T·width values); with
     * {@code targets} (host, B·T int32) also the losses, whose mean it returns (NaN without targets).
     */
    public double forward(MemorySegment inputs, MemorySegment targets, int B, int T) {
        run(inputs, targets, B, T);
        if (targets == null) {
            return Double.NaN;
        }
        return loss.forward(pass, pass.act(losses), pass.act(logits), this.targets, outWidth);
    }

    /**
     * The forward with targets and then the backward of {@code dlossScale · Σ losses} ({@code 1/(B·T)} for the mean
     * loss), adding into {@link #grads()}; returns the mean loss.
     */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale) {
        return forwardBackward(inputs, targets, B, T, dlossScale, null);
    }

    /** {@link #forwardBackward(MemorySegment, MemorySegment, int, int, float)} with a gradient listener. */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale,
                                  java.util.function.IntConsumer gradientsDone) {
        run(inputs, Objects.requireNonNull(targets, "targets"), B, T);
        return backward(dlossScale, gradientsDone);
    }

    /** The backward after a {@link #forward} with targets (which leaves the logits replaced by their gradient). */
    public double backward(float dlossScale) {
        return backward(dlossScale, null);
    }

    /**
     * {@link #backward(float)}, telling {@code gradientsDone} (when not null) each time a {@link UnitScope}'s gradients
     * are final, with the number the scope reports; it runs on the caller's thread between kernels and may start
     * communication on those gradients but must not write them.
     */
    public double backward(float dlossScale, java.util.function.IntConsumer gradientsDone) {
        if (state != State.FORWARD_WITH_TARGETS) {
            throw new IllegalStateException("backward needs a forward with targets first (state: " + state + ")");
        }
        state = State.BACKWARD;
        MemorySegment out = pass.act(logits);
        double mean = loss.forwardBackward(pass, pass.act(losses), out, this.targets, outWidth, dlossScale);
        pass.listen(gradientsDone);
        try {
            body.backward(pass, inputSlice(), out, out, null);
        } finally {
            pass.listen(null);
        }
        return mean;
    }

    /** The outputs of the last forward, {@code (B·T, width)} fp32, valid until its backward. */
    public MemorySegment logits() {
        if (state != State.FORWARD && state != State.FORWARD_WITH_TARGETS) {
            throw new IllegalStateException("the outputs are only valid after a forward and before its backward");
        }
        return pass.act(logits);
    }

    /** Values per position of {@link #logits()}. */
    public int outputWidth() {
        return outWidth;
    }

    /** The per-position losses of the last forward with targets. */
    public MemorySegment losses() {
        if (state == State.EMPTY || state == State.FORWARD) {
            throw new IllegalStateException("no losses: the last forward had no targets");
        }
        return pass.act(losses);
    }

    @Override
    public void close() {
        try {
            if (bf16 != null) {
                bf16.close();
            }
        } finally {
            try {
                if (half != null) {
                    half.close();
                }
            } finally {
                arena.close();
            }
        }
    }

    private MemorySegment inputSlice() {
        return inputs.asSlice(0, (long) pass.rows() * inWidth * Float.BYTES);
    }

    private void run(MemorySegment in, MemorySegment tg, int B, int T) {
        Objects.requireNonNull(in, "inputs");
        if (B < 1 || B > maxB || T < 1 || T > maxT) {
            throw new IllegalArgumentException("B must be in [1, " + maxB + "] and T in [1, " + maxT
                    + "] (the sizes this network was allocated for), got B=" + B + ", T=" + T);
        }
        state = State.EMPTY;
        long n = (long) B * T;
        String what = vocabulary > 0 ? "token" : "class";
        copyIn("inputs", in, inputs, n * inWidth, vocabulary, T, "token", "the model's vocabulary");
        if (tg != null) {
            copyIn("targets", tg, targets, n, loss.classes(), T, what,
                    vocabulary > 0 ? "the model's vocabulary" : "the model's classes");
        }
        pass.begin(B, T);
        body.forward(pass, inputSlice(), pass.act(logits));
        state = tg == null ? State.FORWARD : State.FORWARD_WITH_TARGETS;
    }

    /**
     * Copies {@code n} 4-byte values to the device; with {@code bound} > 0 each is an int checked in [0, bound), a
     * {@code kind} (token, class) of {@code range}.
     */
    private void copyIn(String name, MemorySegment src, MemorySegment dst, long n, int bound, int T, String kind,
                        String range) {
        if (src.byteSize() < n * 4) {
            throw new IllegalArgumentException(name + " has " + src.byteSize() + " bytes, " + n + " values need "
                    + n * 4);
        }
        if (bound > 0) {
            for (long i = 0; i < n; i++) {
                int v = src.getAtIndex(I32, i);
                if (v < 0 || v >= bound) {
                    throw new IllegalArgumentException(name + "[b=" + i / T + ", t=" + i % T + "] is " + kind + " "
                            + v + ", outside " + range + " [0, " + bound + ")");
                }
            }
        }
        memory.copyToDevice(src.asSlice(0, n * 4), dst);
    }
}
