package io.accel4j.train.model;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.HalfParameters;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;

/**
 * {@link Gpt2}'s working weights stored in bf16 ({@code --bf16-params}): the parameters in {@link HalfParameters}
 * unit by unit ({@link ParameterLayout#units()}) — every layer and the final LayerNorm in a bf16 store, widened into
 * one layer's fp32 working region between the unit brackets its {@code UnitScope} makes ({@link #acquire} …
 * {@link #release}), the embeddings (wte, wpe: read by the encoder and by the tied LM head, and larger than a layer)
 * as an fp32 copy of their bf16 values —, and the gradients either in one flat fp32 buffer (as {@link FlatWeights})
 * or in 16 bits ({@link HalfGradients}, as {@link HalfWeights}). There is no fp32 parameter vector: the fp32 master
 * weights are the optimizer's ({@code optim.Bf16StoreAdamW}), which writes this store with stochastic rounding.
 *
 * <p>So the parameters take {@code 2·(Ψ − |wte| − |wpe|) + 4·(|wte| + |wpe|) + 4·|layer| + 2·min(CHUNK, |wte|)}
 * bytes ({@link #parameterBytes}) instead of {@code 4Ψ}.
 */
public final class Bf16ParamWeights implements Weights {

    private final ParameterLayout layout;
    private final DeviceArena arena;
    private final HalfParameters params;
    /** fp32 gradients, or null when {@link #halfGrads} holds them. */
    private final MemorySegment grads;
    private final HalfGradients halfGrads;
    private final Ops ops;
    private boolean closed;

    /**
     * Zeroed bf16 parameters for {@code layout} and {@code gradients} (FP32, BF16 or FP16) gradients in {@code ops}'
     * memory.
     */
    public Bf16ParamWeights(ParameterLayout layout, Ops ops, DType gradients) {
        this.layout = layout;
        this.ops = ops;
        if (gradients != DType.FP32) {
            HalfGradients.checkType(gradients);
        }
        this.arena = ops.memory().arena();
        HalfParameters p = null;
        HalfGradients h = null;
        try {
            p = new HalfParameters(ops, layout.count(), HalfWeights.units(layout));
            this.grads = gradients == DType.FP32 ? arena.allocate(layout.fp32Bytes()) : null;
            h = gradients == DType.FP32 ? null : new HalfGradients(ops, gradients, layout.count(),
                    HalfWeights.units(layout));
        } catch (RuntimeException | OutOfMemoryError e) {
            if (p != null) {
                p.close();
            }
            arena.close();
            throw e;
        }
        this.params = p;
        this.halfGrads = h;
    }

    /** Bytes of the bf16 parameters of {@code config} stored this way, without allocating them. */
    public static long parameterBytes(GptConfig config) {
        ParameterLayout layout = new ParameterLayout(config);
        return HalfParameters.bytes(HalfWeights.units(layout), layout.count());
    }

    /** The bf16 parameters. */
    public HalfParameters parameters() {
        return params;
    }

    /** The fp32 gradients, or null when they are stored in 16 bits ({@link #halfGradients()}). */
    public MemorySegment flatGradients() {
        return grads;
    }

    /** The 16-bit gradients, or null when they are fp32 ({@link #flatGradients()}). */
    public HalfGradients halfGradients() {
        return halfGrads;
    }

    @Override
    public MemorySegment wholeParams() {
        return null;
    }

    @Override
    public MemorySegment param(Param p, int layer) {
        return params.param(layout.unitOf(p, layer), layout.offset(p, layer), layout.count(p, layer));
    }

    @Override
    public MemorySegment grad(Param p, int layer) {
        long offset = layout.offset(p, layer), n = layout.count(p, layer);
        return halfGrads != null ? halfGrads.grad(layout.unitOf(p, layer), offset, n)
                : grads.asSlice(offset * Float.BYTES, n * Float.BYTES);
    }

    @Override
    public void acquire(int unit) {
        params.acquire(unit);
    }

    @Override
    public void prefetch(int unit) { }

    @Override
    public void release(int unit) {
        params.release(unit);
    }

    @Override
    public void zeroGrad() {
        if (halfGrads != null) {
            halfGrads.zero();
        } else {
            ops.memory().zero(grads);
        }
    }

    @Override
    public void beginGradients(int unit) {
        if (halfGrads != null) {
            halfGrads.begin(unit);
        }
    }

    @Override
    public void gradientsDone(int unit) {
        if (halfGrads != null) {
            halfGrads.done(unit);
        }
    }

    @Override
    public long bytes() {
        return params.bytes() + (grads != null ? grads.byteSize() : halfGrads.bytes());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            params.close();
            if (halfGrads != null) {
                halfGrads.close();
            }
        } finally {
            arena.close();
        }
    }
}
