package io.accel4j.train.model;

import static io.accel4j.train.model.Activations.*;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;
import java.util.function.IntConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The monolithic GPT-2 that {@link Gpt2} was until it became a composition of {@code io.accel4j.nn} blocks, kept in the
 * tests as an independent implementation to compare the blocks against, bit for bit ({@code Gpt2BlocksTest}).
 *
 * <p>GPT-2, forward and backward, as llm.c's {@code train_gpt2.c} computes it, through the kernel contract {@link Ops}
 * only (so any backend runs it unchanged): token plus position embedding; L pre-LayerNorm blocks of causal
 * self-attention (fused QKV, {@code NH} heads) and a tanh-GELU MLP of width 4C, each added to the residual stream;
 * a final LayerNorm; logits {@code lnf·wteᵀ} (the LM head is tied to the token embedding and has no bias) over the
 * padded vocabulary, of which the softmax sees only the first V columns.
 *
 * <p>Memory: the parameters and their gradients are two flat fp32 buffers laid out by {@link ParameterLayout}
 * ({@link FlatWeights}; ZeRO-3 replaces them by shards through {@link #useWeights}, and the model reaches them only
 * through {@link Weights}, unit by unit); the activations for {@code maxB·maxT} positions and their gradients one
 * more ({@link Activations}, llm.c's {@code ActivationTensors} with the attention's (L,B,NH,T) log-sum-exp instead of
 * T×T scores). All are allocated once in the backend's memory ({@link Ops#memory()}: host memory for the CPU, device
 * memory for a GPU); {@link #close} frees them. The model never reads or writes that memory on the host: tokens go
 * in, parameters in and out (initialisation, checkpoints) only through the memory's explicit copies, or in place
 * when the memory is the host's ({@link DeviceMemory#hostAccessible()}). A step is {@link #zeroGrad},
 * {@link #forward} with targets, {@link #backward}; or {@link #forwardBackward}, which skips the forward's separate
 * loss pass. With activation checkpointing ({@link Recompute}) the forward keeps fewer activations and backward
 * recomputes the rest, with the same bits.
 *
 * <p>Backward adds into the parameter gradients (so micro-batches accumulate until the next {@code zeroGrad}). The
 * residual adds are not called backward: their gradient is the identity, so the residual stream's gradient
 * accumulates in one buffer from the top of the model down, which each layer's projections read and its
 * LayerNorms' backward add into. Not thread-safe.
 */
public final class Gpt2Monolith implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(Gpt2Monolith.class);

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    private final GptConfig config;
    private final ParameterLayout layout;
    private final Ops ops;
    private final int maxB;
    private final int maxT;
    private final Recompute recompute;
    private final DeviceMemory memory;
    private final DeviceArena arena;
    private Weights weights;
    private final Activations acts;
    private final MemorySegment inputs;
    private final MemorySegment targets;
    private int B;
    private int T;
    private State state = State.EMPTY;
    private DType operands = DType.FP32;
    /** Attention's operand precision, from {@link #operands} and what the backend takes ({@link #attentionOperands}). */
    private DType attentionOperands = DType.FP32;
    /** The blocks' FP8 state, or null: their matmuls then take {@link #operands} too. */
    private Fp8State fp8;

    private enum State { EMPTY, FORWARD, FORWARD_WITH_TARGETS, BACKWARD }

    /**
     * A model of shape {@code config} for batches of up to {@code maxB} sequences of up to {@code maxT} tokens
     * ({@code maxT ≤ config.maxT()}), keeping every activation. Parameters and gradients start at zero: fill
     * {@link #params()} (the tests copy the same values into this model and the blocks).
     */
    public Gpt2Monolith(GptConfig config, Ops ops, int maxB, int maxT) {
        this(config, ops, maxB, maxT, Recompute.NONE);
    }

    /** {@link #Gpt2Monolith(GptConfig, Ops, int, int)} keeping the activations {@code recompute} says. */
    public Gpt2Monolith(GptConfig config, Ops ops, int maxB, int maxT, Recompute recompute) {
        this.config = Objects.requireNonNull(config, "config");
        this.ops = Objects.requireNonNull(ops, "ops");
        this.recompute = Objects.requireNonNull(recompute, "recompute");
        checkBatch(config, maxB, maxT);
        this.maxB = maxB;
        this.maxT = maxT;
        this.layout = new ParameterLayout(config);
        this.memory = ops.memory();
        this.arena = memory.arena();
        try {
            this.weights = new FlatWeights(layout, memory);
            this.acts = new Activations(config, maxB, maxT, recompute, memory, arena);
            long tokens = (long) maxB * maxT * Integer.BYTES;
            this.inputs = arena.allocate(tokens);
            this.targets = arena.allocate(tokens);
        } catch (RuntimeException | OutOfMemoryError e) {
            if (weights != null) {
                weights.close();
            }
            arena.close();
            throw e;
        }
    }

    private static void checkBatch(GptConfig config, int maxB, int maxT) {
        if (maxB < 1 || maxT < 1 || maxT > config.maxT()) {
            throw new IllegalArgumentException("maxB must be >= 1 and maxT in [1, " + config.maxT()
                    + "] (the model's max_seq_len), got maxB=" + maxB + ", maxT=" + maxT);
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

    /**
     * Sets the precision every matmul forms its products in, forward and backward (FP32, the default; BF16 or FP16:
     * operands rounded to it, fp32 accumulation — see {@link MatmulOps}). Parameters, gradients and activations stay
     * fp32. Attention follows where the backend can ({@link #attentionOperands}); the backend is asked here, so that
     * a configuration it cannot run at all is refused before the first step.
     *
     * @throws IllegalArgumentException for other operands, or a head size the backend's attention cannot take even
     *                                  in fp32
     */
    public void matmulOperands(DType operands) {
        this.operands = MatmulOps.checkOperands(operands);
        int C = config.C(), NH = config.NH();
        DType attention = DType.FP32;
        if (operands == DType.BF16) {
            try {
                ops.checkAttention(DType.BF16, C, NH);
                attention = DType.BF16;
            } catch (IllegalArgumentException | UnsupportedOperationException e) {
                LOG.warn("bf16 matmul operands, but attention keeps fp32 operands: {}", e.getMessage());
            }
        }
        if (attention == DType.FP32) {
            ops.checkAttention(DType.FP32, C, NH); // refused here, not at the first step
        }
        this.attentionOperands = attention;
    }

    /**
     * Attention's operand precision ({@link io.accel4j.core.ops.AttentionOps}): BF16 when the matmuls take BF16 and
     * the backend has a BF16 attention for this head size (the GPU's tensor-core kernel takes 64 and 128; the CPU's
     * flash kernel any; otherwise attention keeps FP32 and {@link #matmulOperands} logs a warning saying why); FP32
     * otherwise — fp16 too (the tensor-core attention is bf16 only), and under FP8 the matmul operands are FP32, so
     * attention stays fp32 there as well.
     */
    public DType attentionOperands() {
        return attentionOperands;
    }

    /** The matmuls' operand precision. */
    public DType matmulOperands() {
        return operands;
    }

    /**
     * Runs the blocks' linear layers (qkv, attproj, fc, fcproj of every block) with FP8 operands scaled by
     * {@code state} ({@link MatmulOps}' FP8 methods: inputs and weights as {@code state}'s recipe says — E4M3 under
     * the hybrid recipe — output gradients E5M2); null goes back to {@link #matmulOperands()} for them. The LM head
     * keeps {@link #matmulOperands()} either way. The caller updates the state after each optimizer step.
     *
     * @throws IllegalArgumentException when {@code state} is for another number of blocks
     */
    public void fp8(Fp8State state) {
        if (state != null && state.layers() != config.L()) {
            throw new IllegalArgumentException("the FP8 state covers " + state.layers() + " blocks, the model has "
                    + config.L());
        }
        this.fp8 = state;
    }

    /** The blocks' FP8 state, or null when their matmuls are not FP8. */
    public Fp8State fp8() {
        return fp8;
    }

    /**
     * The parameters: {@code layout().count()} fp32, native order, in {@link #memory()} (a device segment: on the
     * host, through the memory's copies).
     *
     * @throws IllegalStateException when the weights do not hold them whole ({@link Weights#wholeParams()}: ZeRO-3
     *                               shards them)
     */
    public MemorySegment params() {
        MemorySegment p = weights.wholeParams();
        if (p == null) {
            throw new IllegalStateException("the parameters are sharded over the ranks (ZeRO-3, "
                    + weights.getClass().getSimpleName() + "): no rank holds them whole");
        }
        return p;
    }

    /**
     * The parameter gradients, laid out as {@link #params()}, in {@link #memory()}; only with {@link FlatWeights}
     * (not with ZeRO-2/3).
     */
    public MemorySegment grads() {
        return flat().grads();
    }

    /** Where the parameters and gradients live ({@link FlatWeights} unless {@link #useWeights} changed it). */
    public Weights weights() {
        return weights;
    }

    /**
     * From now on reads the parameters from and writes the gradients to {@code next}, which the model owns from here
     * on; the current weights are closed (their memory freed). For ZeRO-3, which replaces the flat buffers by shards.
     */
    public void useWeights(Weights next) {
        Objects.requireNonNull(next, "next");
        Weights old = weights;
        weights = next;
        state = State.EMPTY;
        old.close();
    }

    private FlatWeights flat() {
        if (weights instanceof FlatWeights f) {
            return f;
        }
        throw new IllegalStateException("the gradients are not one flat buffer here: " + weights.getClass()
                .getSimpleName() + " holds them (ZeRO-2 and 3 shard them over the ranks)");
    }

    /** Bytes of the parameters (the gradients take as many again). */
    public long parameterBytes() {
        return layout.fp32Bytes();
    }

    /** Which activations backward recomputes. */
    public Recompute recompute() {
        return recompute;
    }

    /** Bytes of the activations, their gradients and the token buffers, for {@code maxB·maxT} positions. */
    public long activationBytes() {
        return acts.floats() * Float.BYTES + 2 * inputs.byteSize();
    }

    /** Bytes this model allocated: its {@link #weights()} (parameters, gradients) and {@link #activationBytes()}. */
    public long totalBytes() {
        return weights.bytes() + activationBytes();
    }

    /**
     * What {@link #activationBytes()} of a model of shape {@code config} for {@code maxB × maxT} keeping
     * {@code recompute}'s activations is, without allocating it: exact, for planning a batch size.
     */
    public static long activationBytes(GptConfig config, int maxB, int maxT, Recompute recompute) {
        checkBatch(config, maxB, maxT);
        long tokens = (long) maxB * maxT * Integer.BYTES;
        return Activations.floats(config, maxB, maxT, recompute) * Float.BYTES + 2 * tokens;
    }

    /** Zeroes the parameter gradients; {@link #backward} adds into them. */
    public void zeroGrad() {
        weights.zeroGrad();
    }

    /**
     * The forward pass over B sequences of T tokens ({@code inputs}, (B,T) int32 in {@code [0, V)}); the tokens are
     * copied and checked. With {@code targets} ((B,T) int32, the next tokens) it also computes the per-position
     * losses and returns their mean; without, NaN. {@link #logits()} holds the result until the next backward.
     */
    public double forward(MemorySegment inputs, MemorySegment targets, int B, int T) {
        run(inputs, targets, B, T);
        if (targets == null) {
            return Double.NaN;
        }
        int BT = B * T;
        return ops.classifierForward(acts.slice(LOSSES, BT), acts.slice(LOGITS, BT), this.targets, BT,
                config.V(), config.Vp());
    }

    /**
     * The forward with targets and then {@link #backward}, with one loss pass instead of two.
     *
     * @return the mean loss of the batch
     */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale) {
        return forwardBackward(inputs, targets, B, T, dlossScale, null);
    }

    /** {@link #forwardBackward(MemorySegment, MemorySegment, int, int, float)} with {@link #backward(float,
     * IntConsumer)}'s {@code gradientsDone}. */
    public double forwardBackward(MemorySegment inputs, MemorySegment targets, int B, int T, float dlossScale,
                                  IntConsumer gradientsDone) {
        run(inputs, Objects.requireNonNull(targets, "targets"), B, T);
        return backward(dlossScale, gradientsDone);
    }

    /**
     * Adds the gradient of {@code dlossScale · Σ losses} with respect to every parameter into {@link #grads()}
     * ({@code dlossScale = 1/(B·T)} for the mean loss; 1/(B·T·K) for one of K accumulated micro-batches). Needs a
     * forward with targets since the last backward; leaves the logits replaced by their gradient.
     *
     * @return the mean loss of the forward's batch
     */
    public double backward(float dlossScale) {
        return backward(dlossScale, null);
    }

    /**
     * {@link #backward(float)}, telling {@code gradientsDone} (when not null) as soon as gradients are final for this
     * backward: {@code accept(l)} for l = L−1 down to 0 once layer l's slices of the 12 per-layer tensors
     * (ln1w … fcprojb) are, then {@code accept(-1)} once the rest (wte, wpe, lnfw, lnfb) are. The callback runs on
     * the caller's thread between kernels; it may start communication on those slices but must not write them.
     */
    public double backward(float dlossScale, IntConsumer gradientsDone) {
        if (state != State.FORWARD_WITH_TARGETS) {
            throw new IllegalStateException("backward needs a forward with targets first (state: " + state + ")");
        }
        state = State.BACKWARD;
        GptConfig c = config;
        int BT = B * T, C = c.C(), L = c.L(), NH = c.NH();
        MemorySegment logits = acts.slice(LOGITS, BT);
        int fin = layout.finalUnit();
        weights.acquire(ParameterLayout.EMBEDDING);
        weights.prefetch(fin);
        double loss = ops.classifierForwardBackward(logits, acts.slice(LOSSES, BT), targets, BT, c.V(), c.Vp(),
                dlossScale);
        MemorySegment dres = acts.zeroed(DRESIDUAL, BT);
        MemorySegment dln = acts.zeroed(DLN, BT);
        MemorySegment lastResidual = acts.slice(RESIDUAL3, L - 1, BT);
        weights.beginGradients(ParameterLayout.EMBEDDING);
        ops.matmulBackward(dln, weights.grad(Param.WTE, -1), null, logits, acts.slice(LNF, BT),
                weights.param(Param.WTE, -1), BT, C, c.Vp(), operands);
        weights.release(ParameterLayout.EMBEDDING);
        weights.acquire(fin);
        weights.prefetch(ParameterLayout.layerUnit(L - 1));
        weights.beginGradients(fin);
        ops.layernormBackward(dres, weights.grad(Param.LNFW, -1), weights.grad(Param.LNFB, -1), dln, lastResidual,
                weights.param(Param.LNFW, -1), acts.slice(LNF_MEAN, BT), acts.slice(LNF_RSTD, BT), BT, C);
        weights.release(fin);
        weights.gradientsDone(fin);
        for (int l = L - 1; l >= 0; l--) {
            int unit = ParameterLayout.layerUnit(l);
            weights.acquire(unit);
            if (l > 0) {
                weights.prefetch(ParameterLayout.layerUnit(l - 1));
            }
            MemorySegment residual = l == 0 ? acts.slice(ENCODED, BT) : acts.slice(RESIDUAL3, l - 1, BT);
            if (l < L - 1) { // the top layer's activations are still those of the forward
                if (recompute == Recompute.GELU) {
                    ops.geluForward(acts.slice(FCH_GELU, l, BT), acts.slice(FCH, l, BT), (long) BT * 4 * C);
                } else if (recompute == Recompute.LAYER) {
                    layerForward(l, residual, false);
                }
            }
            weights.beginGradients(unit);
            // the MLP: dres is d(residual3) = d(fcproj)
            MemorySegment dfch = mlpBackward(l, dres);
            dln = acts.zeroed(DLN, BT);
            linearBackward(Fp8State.Linear.FC, l, dln, weights.grad(Param.FCW, l),
                    fp8 == null ? null : weights.grad(Param.FCB, l), dfch, acts.slice(LN2, l, BT),
                    weights.param(Param.FCW, l), BT, C, 4 * C);
            ops.layernormBackward(dres, weights.grad(Param.LN2W, l), weights.grad(Param.LN2B, l), dln,
                    acts.slice(RESIDUAL2, l, BT), weights.param(Param.LN2W, l), acts.slice(LN2_MEAN, l, BT),
                    acts.slice(LN2_RSTD, l, BT), BT, C);
            // attention: dres is now d(residual2) = d(attproj)
            MemorySegment datty = acts.zeroed(DATTY, BT);
            linearBackward(Fp8State.Linear.ATTPROJ, l, datty, weights.grad(Param.ATTPROJW, l),
                    weights.grad(Param.ATTPROJB, l), dres, acts.slice(ATTY, l, BT), weights.param(Param.ATTPROJW, l),
                    BT, C, C);
            MemorySegment dqkv = acts.zeroed(DQKV, BT);
            ops.attentionBackward(dqkv, datty, acts.slice(QKV, l, BT), acts.slice(ATTY, l, BT),
                    acts.slice(LSE, l, BT), B, T, C, NH, attentionOperands());
            dln = acts.zeroed(DLN, BT);
            linearBackward(Fp8State.Linear.QKV, l, dln, weights.grad(Param.QKVW, l), weights.grad(Param.QKVB, l),
                    dqkv, acts.slice(LN1, l, BT), weights.param(Param.QKVW, l), BT, C, 3 * C);
            ops.layernormBackward(dres, weights.grad(Param.LN1W, l), weights.grad(Param.LN1B, l), dln, residual,
                    weights.param(Param.LN1W, l), acts.slice(LN1_MEAN, l, BT), acts.slice(LN1_RSTD, l, BT), BT, C);
            // dres is now d(residual3 of layer l−1), or d(encoded)
            weights.release(unit);
            weights.gradientsDone(unit);
            if (gradientsDone != null) {
                gradientsDone.accept(l);
            }
        }
        ops.encoderBackward(weights.grad(Param.WTE, -1), weights.grad(Param.WPE, -1), dres, inputs, B, T, C,
                c.V());
        weights.gradientsDone(ParameterLayout.EMBEDDING);
        if (gradientsDone != null) {
            gradientsDone.accept(-1);
        }
        return loss;
    }

    /**
     * The logits of the last forward, {@code (B, T, Vp)} fp32 (columns V…Vp−1 are padding), valid until the next
     * backward or forward; a device segment of {@link #memory()}.
     */
    public MemorySegment logits() {
        if (state != State.FORWARD && state != State.FORWARD_WITH_TARGETS) {
            throw new IllegalStateException("the logits are only valid after a forward and before its backward");
        }
        return acts.slice(LOGITS, (long) B * T);
    }

    /** The per-position losses {@code (B, T)} of the last forward with targets, in {@link #memory()}. */
    public MemorySegment losses() {
        if (state == State.EMPTY || state == State.FORWARD) {
            throw new IllegalStateException("no losses: the last forward had no targets");
        }
        return acts.slice(LOSSES, (long) B * T);
    }

    /** Frees all memory; the model cannot be used afterwards. */
    @Override
    public void close() {
        weights.close();
        arena.close();
    }

    /** The forward without the loss: copies and checks the tokens, ends with the logits. */
    private void run(MemorySegment inputs, MemorySegment targets, int B, int T) {
        Objects.requireNonNull(inputs, "inputs");
        if (B < 1 || B > maxB || T < 1 || T > maxT) {
            throw new IllegalArgumentException("B must be in [1, " + maxB + "] and T in [1, " + maxT
                    + "] (the sizes this model was allocated for), got B=" + B + ", T=" + T);
        }
        state = State.EMPTY;
        copyTokens("inputs", inputs, this.inputs, B, T);
        if (targets != null) {
            copyTokens("targets", targets, this.targets, B, T);
        }
        this.B = B;
        this.T = T;
        GptConfig c = config;
        int BT = B * T, C = c.C(), L = c.L(), NH = c.NH();
        MemorySegment encoded = acts.slice(ENCODED, BT);
        int emb = ParameterLayout.EMBEDDING, fin = layout.finalUnit();
        weights.acquire(emb);
        weights.prefetch(ParameterLayout.layerUnit(0));
        ops.encoderForward(encoded, this.inputs, weights.param(Param.WTE, -1), weights.param(Param.WPE, -1), B, T,
                C, c.V());
        weights.release(emb);
        MemorySegment residual = encoded;
        for (int l = 0; l < L; l++) {
            int unit = ParameterLayout.layerUnit(l);
            weights.acquire(unit);
            weights.prefetch(l + 1 < L ? ParameterLayout.layerUnit(l + 1) : fin);
            layerForward(l, residual, true);
            weights.release(unit);
            residual = acts.slice(RESIDUAL3, l, BT);
        }
        MemorySegment lnf = acts.slice(LNF, BT);
        weights.acquire(fin);
        weights.prefetch(emb);
        ops.layernormForward(lnf, acts.slice(LNF_MEAN, BT), acts.slice(LNF_RSTD, BT), residual,
                weights.param(Param.LNFW, -1), weights.param(Param.LNFB, -1), BT, C);
        weights.release(fin);
        weights.acquire(emb);
        ops.matmulForward(acts.slice(LOGITS, BT), lnf, weights.param(Param.WTE, -1), null, BT, C, c.Vp(), operands);
        weights.release(emb);
        state = targets == null ? State.FORWARD : State.FORWARD_WITH_TARGETS;
    }

    /**
     * Block {@code l}'s forward from {@code residual} (its input on the residual stream) for the current B, T; with
     * {@code toOutput} false (a recomputation for backward) it stops after the MLP's GELU: the projection and the
     * residual add only make the layer's output, which backward does not read and {@link Recompute#LAYER} keeps.
     */
    private void layerForward(int l, MemorySegment residual, boolean toOutput) {
        int BT = B * T, C = config.C();
        MemorySegment ln1 = acts.slice(LN1, l, BT), qkv = acts.slice(QKV, l, BT), atty = acts.slice(ATTY, l, BT);
        MemorySegment attproj = acts.slice(ATTPROJ, l, BT), residual2 = acts.slice(RESIDUAL2, l, BT);
        MemorySegment ln2 = acts.slice(LN2, l, BT), fch = acts.slice(FCH, l, BT);
        MemorySegment fchGelu = acts.slice(FCH_GELU, l, BT);
        ops.layernormForward(ln1, acts.slice(LN1_MEAN, l, BT), acts.slice(LN1_RSTD, l, BT), residual,
                weights.param(Param.LN1W, l), weights.param(Param.LN1B, l), BT, C);
        linearForward(Fp8State.Linear.QKV, l, qkv, ln1, weights.param(Param.QKVW, l), weights.param(Param.QKVB, l),
                BT, C, 3 * C);
        ops.attentionForward(atty, acts.slice(LSE, l, BT), qkv, B, T, C, config.NH(), attentionOperands());
        linearForward(Fp8State.Linear.ATTPROJ, l, attproj, atty, weights.param(Param.ATTPROJW, l),
                weights.param(Param.ATTPROJB, l), BT, C, C);
        ops.residualForward(residual2, residual, attproj, (long) BT * C);
        ops.layernormForward(ln2, acts.slice(LN2_MEAN, l, BT), acts.slice(LN2_RSTD, l, BT), residual2,
                weights.param(Param.LN2W, l), weights.param(Param.LN2B, l), BT, C);
        if (fp8 == null) { // fch = ln2·Wᵀ + b and fchGelu = gelu(fch) in one GEMM epilogue
            ops.matmulForwardGelu(fchGelu, fch, ln2, weights.param(Param.FCW, l), weights.param(Param.FCB, l), BT,
                    C, 4 * C, operands);
        } else {
            linearForward(Fp8State.Linear.FC, l, fch, ln2, weights.param(Param.FCW, l), weights.param(Param.FCB, l),
                    BT, C, 4 * C);
            ops.geluForward(fchGelu, fch, (long) BT * 4 * C);
        }
        if (toOutput) {
            MemorySegment fcproj = acts.slice(FCPROJ, l, BT);
            linearForward(Fp8State.Linear.FCPROJ, l, fcproj, fchGelu, weights.param(Param.FCPROJW, l),
                    weights.param(Param.FCPROJB, l), BT, 4 * C, C);
            ops.residualForward(acts.slice(RESIDUAL3, l, BT), residual2, fcproj, (long) BT * C);
        }
    }

    /**
     * Block {@code l}'s MLP projection backward through the GELU: returns dfch, d(fc's output), from dres =
     * d(fcproj's output). Without FP8 one fused call writes dfch = gelu'(fch)·(dres·Wfcproj) and adds the fc bias
     * gradient Σ_rows dfch (so fc's own backward then gets no dbias); with FP8 the projection's FP8 backward into
     * dfchGelu, then the GELU backward (fc's backward adds its bias gradient).
     */
    private MemorySegment mlpBackward(int l, MemorySegment dres) {
        int BT = B * T, C = config.C();
        if (fp8 == null) {
            MemorySegment dfch = acts.slice(DFCH, BT); // written, not added to
            ops.matmulBackwardGelu(dfch, weights.grad(Param.FCB, l), weights.grad(Param.FCPROJW, l),
                    weights.grad(Param.FCPROJB, l), dres, acts.slice(FCH_GELU, l, BT), acts.slice(FCH, l, BT),
                    weights.param(Param.FCPROJW, l), BT, 4 * C, C, operands);
            return dfch;
        }
        MemorySegment dfchGelu = acts.zeroed(DFCH_GELU, BT);
        linearBackward(Fp8State.Linear.FCPROJ, l, dfchGelu, weights.grad(Param.FCPROJW, l),
                weights.grad(Param.FCPROJB, l), dres, acts.slice(FCH_GELU, l, BT), weights.param(Param.FCPROJW, l),
                BT, 4 * C, C);
        MemorySegment dfch = acts.zeroed(DFCH, BT);
        ops.geluBackward(dfch, acts.slice(FCH, l, BT), dfchGelu, (long) BT * 4 * C);
        return dfch;
    }

    /** Block {@code l}'s linear layer {@code which} forward: FP8 with its state when the model has one. */
    private void linearForward(Fp8State.Linear which, int l, MemorySegment out, MemorySegment inp,
                               MemorySegment weight, MemorySegment bias, int N, int C, int OC) {
        if (fp8 != null) {
            ops.matmulForward(out, inp, weight, bias, N, C, OC, fp8.linear(l, which));
        } else {
            ops.matmulForward(out, inp, weight, bias, N, C, OC, operands);
        }
    }

    /** Block {@code l}'s linear layer {@code which} backward, as {@link #linearForward}. */
    private void linearBackward(Fp8State.Linear which, int l, MemorySegment dinp, MemorySegment dweight,
                                MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment weight,
                                int N, int C, int OC) {
        if (fp8 != null) {
            ops.matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fp8.linear(l, which));
        } else {
            ops.matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        }
    }

    /** Copies B·T tokens from the host into {@code dst}, each checked (on the host) to be in [0, V) first. */
    private void copyTokens(String name, MemorySegment src, MemorySegment dst, int B, int T) {
        long n = (long) B * T;
        if (src.byteSize() < n * Integer.BYTES) {
            throw new IllegalArgumentException(name + " has " + src.byteSize() + " bytes, B*T = " + n
                    + " int32 tokens need " + n * Integer.BYTES);
        }
        int V = config.V();
        for (long i = 0; i < n; i++) {
            int tok = src.getAtIndex(I32, i);
            if (tok < 0 || tok >= V) {
                throw new IllegalArgumentException(name + "[b=" + i / T + ", t=" + i % T + "] is token " + tok
                        + ", outside the model's vocabulary [0, " + V + ")");
            }
        }
        memory.copyToDevice(src.asSlice(0, n * Integer.BYTES), dst);
    }
}
