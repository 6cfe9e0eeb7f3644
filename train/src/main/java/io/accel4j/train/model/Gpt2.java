package io.accel4j.train.model;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.Network;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;
import java.util.function.IntConsumer;

/**
 * GPT-2 as llm.c's {@code train_gpt2.c} computes it: the {@link Network} of {@link Gpt2Blocks} (token plus position
 * embedding; L pre-LayerNorm blocks of causal self-attention with fused QKV and a tanh-GELU MLP of width 4C; a final
 * LayerNorm; logits {@code lnf·wteᵀ} over the padded vocabulary, of which the softmax sees the first V columns), with
 * its parameters and gradients in {@link Weights} laid out by {@link ParameterLayout} — llm.c's flat buffer, which
 * ZeRO-2/3 replace by shards ({@link #useWeights}) — and the units the weights gather bracketed by the blocks'
 * {@link io.accel4j.nn.UnitScope}s.
 *
 * <p>Precision is fixed when the model is made ({@link Gpt2Options}): the matmuls' operands (FP32, BF16, FP16;
 * attention BF16 where the backend takes it) or FP8 linear layers under a delayed-scaling recipe ({@link #fp8()}), the
 * LM head staying in the operands' precision; so is how activations, gradients and working weights are stored.
 * Activation checkpointing ({@link Recompute}) keeps fewer activations and recomputes the rest with the same bits.
 * All memory is the backend's ({@link Ops#memory()}), allocated once; {@link #close} frees it.
 *
 * <p>A step is {@link #zeroGrad}, {@link #forward} with targets, {@link #backward}; or {@link #forwardBackward}.
 * Backward adds into the gradients, so micro-batches accumulate until the next {@code zeroGrad}. Not thread-safe.
 */
public final class Gpt2 implements AutoCloseable {

    private final GptConfig config;
    private final ParameterLayout layout;
    private final Ops ops;
    private final int maxB;
    private final int maxT;
    private final Gpt2Options options;
    private final DeviceMemory memory;
    private final WeightsSource source;
    private final Network net;

    /**
     * A model of shape {@code config} for batches of up to {@code maxB} sequences of up to {@code maxT} tokens
     * ({@code maxT ≤ config.maxT()}), fp32, keeping every activation ({@link Gpt2Options#DEFAULT}).
     */
    public Gpt2(GptConfig config, Ops ops, int maxB, int maxT) {
        this(config, ops, maxB, maxT, Gpt2Options.DEFAULT);
    }

    /**
     * A model of shape {@code config} for batches of up to {@code maxB} sequences of up to {@code maxT} tokens
     * ({@code maxT ≤ config.maxT()}), made as {@code options} say. Parameters and gradients start at zero: fill
     * {@link #params()} (e.g. {@link #initialise}, {@link #load}).
     *
     * @throws IllegalArgumentException for sizes out of range, storage types the blocks or weights cannot take, or
     *                                  sizes the backend's attention cannot take
     */
    public Gpt2(GptConfig config, Ops ops, int maxB, int maxT, Gpt2Options options) {
        this.config = Objects.requireNonNull(config, "config");
        this.ops = Objects.requireNonNull(ops, "ops");
        this.options = Objects.requireNonNull(options, "options");
        checkBatch(config, maxB, maxT);
        this.maxB = maxB;
        this.maxT = maxT;
        this.layout = new ParameterLayout(config);
        this.memory = ops.memory();
        DType gradients = options.gradients();
        this.source = new WeightsSource(options.parameters() == DType.BF16
                ? new Bf16ParamWeights(layout, ops, gradients)
                : gradients == DType.FP32 ? new FlatWeights(layout, memory) : new HalfWeights(layout, ops, gradients));
        try {
            this.net = Gpt2Blocks.spec(config).batch(maxB, maxT).recompute(options.recompute())
                    .matmulOperands(options.operands()).activationStorage(options.activations()).fp8(options.fp8())
                    .parameters(source::bind, source).build(ops);
        } catch (RuntimeException | Error e) {
            source.weights.close();
            throw e;
        }
    }

    private static void checkBatch(GptConfig config, int maxB, int maxT) {
        if (maxB < 1 || maxT < 1 || maxT > config.maxT()) {
            throw new IllegalArgumentException("maxB must be >= 1 and maxT in [1, " + config.maxT()
                    + "] (the model's max_seq_len), got maxB=" + maxB + ", maxT=" + maxT);
        }
    }

    /** Reads an llm.c checkpoint ({@link LlmcCheckpoint}, fp32 or bf16) into a new fp32 model. */
    public static Gpt2 load(Path file, Ops ops, int maxB, int maxT) throws IOException {
        return load(file, ops, maxB, maxT, Gpt2Options.DEFAULT);
    }

    /**
     * Reads an llm.c checkpoint ({@link LlmcCheckpoint}, fp32 or bf16) into a new model made as {@code options} say,
     * its {@code maxT} capped at the checkpoint's.
     */
    public static Gpt2 load(Path file, Ops ops, int maxB, int maxT, Gpt2Options options) throws IOException {
        try (Arena tmp = Arena.ofConfined()) {
            LlmcCheckpoint.Loaded loaded = LlmcCheckpoint.read(file, tmp);
            Gpt2 model = new Gpt2(loaded.config(), ops, maxB, Math.min(maxT, loaded.config().maxT()), options);
            try {
                model.copyParamsFromHost(loaded.params());
            } catch (RuntimeException e) {
                model.close();
                throw e;
            }
            return model;
        }
    }

    /** Writes the parameters as an llm.c checkpoint (fp32, version 3), atomically. */
    public void save(Path file) throws IOException {
        if (source.weights instanceof Bf16ParamWeights) {
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment host = staging.allocate(layout.fp32Bytes(), 64);
                copyParamsToHost(host);
                LlmcCheckpoint.write(file, config, host, LlmcCheckpoint.VERSION_FP32);
            }
            return;
        }
        try (Arena staging = Arena.ofConfined()) { // on the CPU written as they are, else staged
            LlmcCheckpoint.write(file, config, memory.readableOnHost(params(), staging), LlmcCheckpoint.VERSION_FP32);
        }
    }

    /** Sets the parameters to GPT-2's initialisation from {@code seed} ({@link ParameterInit#gpt2}). */
    public void initialise(long seed) {
        if (source.weights instanceof Bf16ParamWeights) {
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment host = staging.allocate(layout.fp32Bytes(), 64);
                ParameterInit.gpt2(layout, host, seed);
                copyParamsFromHost(host);
            }
            return;
        }
        try (Arena staging = Arena.ofConfined()) { // on the CPU in place: no second copy of the parameters
            MemorySegment params = params(), host = memory.writableOnHost(params, staging);
            ParameterInit.gpt2(layout, host, seed);
            memory.writeBack(host, params);
        }
    }

    /**
     * Sets the parameters from {@code host} (host memory, {@code layout().count()} fp32 in native order; more bytes
     * are ignored).
     */
    public void copyParamsFromHost(MemorySegment host) {
        checkParamsOnHost("host", host);
        if (source.weights instanceof Bf16ParamWeights b) { // rounded to nearest even
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment bf16 = staging.allocate(layout.count() * 2, 64);
                io.accel4j.cpu.Casts.f32ToBf16(bf16, 0, host, 0, layout.count());
                b.parameters().load(bf16);
            }
            return;
        }
        memory.copyToDevice(host.asSlice(0, layout.fp32Bytes()), params());
    }

    /** Copies the parameters into {@code host} (host memory of at least {@link #parameterBytes()}). */
    public void copyParamsToHost(MemorySegment host) {
        checkParamsOnHost("host", host);
        if (source.weights instanceof Bf16ParamWeights b) { // the bf16 working weights, widened on the host
            b.parameters().readToHost(host);
            return;
        }
        memory.copyToHost(params(), host.asSlice(0, layout.fp32Bytes()));
    }

    private void checkParamsOnHost(String name, MemorySegment host) {
        if (Objects.requireNonNull(host, name).byteSize() < layout.fp32Bytes()) {
            throw new IllegalArgumentException(name + " has " + host.byteSize() + " bytes, the " + layout.count()
                    + " fp32 parameters need " + layout.fp32Bytes());
        }
    }

    /** The model's shape. */
    public GptConfig config() {
        return config;
    }

    /** Where each parameter tensor lives in {@link #params()} and {@link #grads()}. */
    public ParameterLayout layout() {
        return layout;
    }

    /** The most sequences per batch. */
    public int maxB() {
        return maxB;
    }

    /** The longest sequence. */
    public int maxT() {
        return maxT;
    }

    /** The backend. */
    public Ops ops() {
        return ops;
    }

    /** The backend's memory, which holds {@link #params()}, {@link #grads()} and the activations. */
    public DeviceMemory memory() {
        return memory;
    }

    /** The blocks this model is made of. */
    public Network network() {
        return net;
    }

    /** The matmuls' operand precision (under FP8: the LM head's). */
    public DType matmulOperands() {
        return options.operands();
    }

    /**
     * Attention's operand precision: BF16 when the matmuls take BF16 and the backend has a BF16 attention for this
     * head size (the GPU's tensor-core kernel takes 64 and 128; the CPU's flash kernel any; otherwise the model
     * logged a warning and attention keeps FP32), FP32 otherwise.
     */
    public DType attentionOperands() {
        return net.attentionOperands();
    }

    /** The blocks' FP8 state (amax histories and scales of their linear layers), or null without FP8. */
    public Fp8State fp8() {
        return net.fp8();
    }

    /**
     * The parameters: {@code layout().count()} fp32, native order, in {@link #memory()}. Under an overlapped offloaded
     * optimizer ({@link #beforeAcquire}) the last update may still be arriving between two steps: read them after the
     * trainer's last step, a checkpoint or its close, which wait for it.
     *
     * @throws IllegalStateException when the weights do not hold them whole (ZeRO-3 shards them)
     */
    public MemorySegment params() {
        MemorySegment p = source.weights.wholeParams();
        if (p == null && source.weights instanceof Bf16ParamWeights) {
            throw new IllegalStateException("the working weights are stored in bf16 (--bf16-params): there is no fp32 "
                    + "parameter vector (the optimizer holds the fp32 master); use copyParamsToHost or halfParameters()");
        }
        if (p == null) {
            throw new IllegalStateException("the parameters are sharded over the ranks (ZeRO-3, "
                    + source.weights.getClass().getSimpleName() + "): no rank holds them whole");
        }
        return p;
    }

    /** The parameter gradients, laid out as {@link #params()}; only with {@link FlatWeights} (not ZeRO-2/3). */
    public MemorySegment grads() {
        if (source.weights instanceof FlatWeights f) {
            return f.grads();
        }
        if (source.weights instanceof Bf16ParamWeights b && b.flatGradients() != null) {
            return b.flatGradients();
        }
        throw new IllegalStateException("the gradients are not one flat fp32 buffer here: " + source.weights
                .getClass().getSimpleName() + " holds them (ZeRO-2 and 3 shard them over the ranks; 16-bit gradients "
                + "are read through halfGradients())");
    }

    /** How the gradients are stored: FP32, or BF16/FP16 ({@link HalfWeights}). */
    public DType gradientStorage() {
        return options.gradients();
    }

    /**
     * The 16-bit gradients ({@link #gradientStorage()} BF16 or FP16).
     *
     * @throws IllegalStateException when the gradients are fp32 or the weights were replaced
     */
    public io.accel4j.nn.HalfGradients halfGradients() {
        if (source.weights instanceof HalfWeights h) {
            return h.gradients();
        }
        if (source.weights instanceof Bf16ParamWeights b && b.halfGradients() != null) {
            return b.halfGradients();
        }
        throw new IllegalStateException("the gradients are not stored in 16 bits here: "
                + source.weights.getClass().getSimpleName() + " holds them");
    }

    /** How the working weights are stored: FP32, or BF16 ({@link Bf16ParamWeights}, {@code --bf16-params}). */
    public DType parameterStorage() {
        return options.parameters();
    }

    /**
     * The bf16 working weights ({@link #parameterStorage()} BF16).
     *
     * @throws IllegalStateException when the parameters are fp32
     */
    public io.accel4j.nn.HalfParameters halfParameters() {
        if (source.weights instanceof Bf16ParamWeights b) {
            return b.parameters();
        }
        throw new IllegalStateException("the working weights are not stored in bf16 here: "
                + source.weights.getClass().getSimpleName() + " holds them");
    }

    /**
     * From now on runs {@code hook} with a unit's index before each use of its parameters (forward and backward,
     * ahead of {@link Weights#acquire}): an offloaded optimizer's deferred upload makes the unit wait there for its
     * parameters ({@code io.accel4j.optim.Optimizer#deferUpload}). Null: none.
     */
    public void beforeAcquire(IntConsumer hook) {
        source.beforeAcquire = hook;
    }

    /** Where the parameters and gradients live ({@link FlatWeights} unless {@link #useWeights} changed it). */
    public Weights weights() {
        return source.weights;
    }

    /**
     * From now on reads the parameters from and writes the gradients to {@code next}, which the model owns from here
     * on; the current weights are closed (their memory freed). For ZeRO-2/3, which replace the flat buffers by shards.
     */
    public void useWeights(Weights next) {
        Objects.requireNonNull(next, "next");
        if (options.parameters() != DType.FP32) {
            throw new IllegalStateException("this model stores its working weights in bf16 (Bf16ParamWeights): they "
                    + "cannot be replaced by " + next.getClass().getSimpleName());
        }
        if (options.gradients() != DType.FP32) {
            throw new IllegalStateException("this model stores its gradients in " + options.gradients()
                    + " (HalfWeights): they cannot be replaced by " + next.getClass().getSimpleName() + "'s fp32 ones");
        }
        Weights old = source.weights;
        source.weights = next;
        old.close();
    }

    /**
     * Bytes of the fp32 parameter vector ({@link #copyParamsToHost}'s, the model file's); what the weights take is
     * {@link #weights()}' bytes (bf16 working weights, {@link Bf16ParamWeights}, take fewer).
     */
    public long parameterBytes() {
        return layout.fp32Bytes();
    }

    /** Which activations backward recomputes. */
    public Recompute recompute() {
        return options.recompute();
    }

    /** How this model was made. */
    public Gpt2Options options() {
        return options;
    }

    /** Bytes of the activations, their gradients and the token buffers, for {@code maxB·maxT} positions. */
    public long activationBytes() {
        return net.activationBytes();
    }

    /** Bytes this model allocated: its {@link #weights()} (parameters, gradients) and {@link #activationBytes()}. */
    public long totalBytes() {
        return source.weights.bytes() + activationBytes();
    }

    /**
     * What {@link #activationBytes()} of a model of shape {@code config} for {@code maxB × maxT} keeping
     * {@code recompute}'s activations is, without allocating it: exact, for planning a batch size.
     */
    public static long activationBytes(GptConfig config, int maxB, int maxT, Recompute recompute) {
        return activationBytes(config, maxB, maxT, recompute, DType.FP32);
    }

    /** {@link #activationBytes(GptConfig, int, int, Recompute)} with the saved activations stored in {@code storage}. */
    public static long activationBytes(GptConfig config, int maxB, int maxT, Recompute recompute, DType storage) {
        checkBatch(config, maxB, maxT);
        return Gpt2Blocks.spec(config).batch(maxB, maxT).recompute(recompute).activationStorage(storage)
                .activationBytes();
    }

    /** How the activations saved for backward are stored (FP32, BF16, FP16). */
    public DType activationStorage() {
        return options.activations();
    }

    /** Zeroes the parameter gradients; {@link #backward} adds into them. */
    public void zeroGrad() {
        source.weights.zeroGrad();
    }

    /**
     * The forward pass over B sequences of T tokens ({@code inputs}, (B,T) int32 in {@code [0, V)}); the tokens are
     * copied and checked. With {@code targets} ((B,T) int32, the next tokens) it also computes the per-position
     * losses and returns their mean; without, NaN. {@link #logits()} holds the result until the next backward.
     */
    public double forward(MemorySegment inputs, MemorySegment targets, int B, int T) {
        return net.forward(inputs, targets, B, T);
    }

    /** The forward with targets and then {@link #backward}; returns the mean loss of the batch. */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale) {
        return net.forwardBackward(inputs, targets, B, T, dlossScale);
    }

    /**
     * {@link #forwardBackward(MemorySegment, MemorySegment, int, int, float)} with {@link #backward(float,
     * IntConsumer)}'s {@code gradientsDone}.
     */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale,
                                  IntConsumer gradientsDone) {
        return net.forwardBackward(inputs, targets, B, T, dlossScale, gradientsDone);
    }

    /**
     * Adds the gradient of {@code dlossScale · Σ losses} with respect to every parameter into the gradients
     * ({@code dlossScale = 1/(B·T)} for the mean loss; 1/(B·T·K) for one of K accumulated micro-batches). Needs a
     * forward with targets since the last backward; leaves the logits replaced by their gradient.
     *
     * @return the mean loss of the forward's batch
     */
    public double backward(float dlossScale) {
        return net.backward(dlossScale);
    }

    /**
     * {@link #backward(float)}, telling {@code gradientsDone} (when not null) as soon as gradients are final for this
     * backward: {@code accept(l)} for l = L−1 down to 0 once layer l's slices of the 12 per-layer tensors
     * (ln1w … fcprojb) are, then {@code accept(-1)} once the rest (wte, wpe, lnfw, lnfb) are. The callback runs on
     * the caller's thread between kernels; it may start communication on those slices but must not write them.
     */
    public double backward(float dlossScale, IntConsumer gradientsDone) {
        return net.backward(dlossScale, gradientsDone);
    }

    /**
     * The logits of the last forward, {@code (B, T, Vp)} fp32 (columns V…Vp−1 are padding), valid until the next
     * backward or forward; a device segment of {@link #memory()}.
     */
    public MemorySegment logits() {
        return net.logits();
    }

    /** The per-position losses {@code (B, T)} of the last forward with targets, in {@link #memory()}. */
    public MemorySegment losses() {
        return net.losses();
    }

    /** Frees all memory; the model cannot be used afterwards. */
    @Override
    public void close() {
        net.close();
        source.weights.close();
    }
}
