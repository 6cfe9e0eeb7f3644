package io.accel4j.train.model;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.HalfUnitLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link Gpt2}'s parameters as one flat fp32 buffer, as {@link FlatWeights}, and its gradients in 16 bits
 * ({@link HalfGradients}) unit by unit ({@link ParameterLayout#units()}): every layer and the final LayerNorm are half
 * units — each block's backward, between the unit brackets its {@code UnitScope} makes, adds into an fp32 working
 * region of one layer's size, expanded from the 16-bit store before and rounded into it after — while the embeddings
 * (wte, wpe) keep fp32 gradients: the tied LM head opens them and the embedding's backward closes them, with every
 * block's backward in between.
 *
 * <p>So the gradients take {@code 4·(|wte| + |wpe|) + 2·(Ψ − |wte| − |wpe|) + 4·|layer| + 4·min(CHUNK, 4C²)} bytes
 * ({@link #gradientBytes}) instead of {@code 4Ψ}.
 */
public final class HalfWeights implements Weights {

    private final ParameterLayout layout;
    private final DeviceArena arena;
    private final MemorySegment params;
    private final HalfGradients grads;
    private boolean closed;

    /** Zeroed fp32 parameters and {@code type} (BF16 or FP16) gradients for {@code layout} in {@code ops}' memory. */
    public HalfWeights(ParameterLayout layout, Ops ops, DType type) {
        this.layout = layout;
        HalfGradients.checkType(type);
        this.arena = ops.memory().arena();
        try {
            this.params = arena.allocate(layout.fp32Bytes());
            this.grads = new HalfGradients(ops, type, layout.count(), units(layout));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    /**
     * The units of {@code layout} as {@link HalfGradients} and {@link io.accel4j.nn.HalfParameters} take them: every
     * one half but the embeddings.
     */
    static List<HalfUnitLayout.Unit> units(ParameterLayout layout) {
        List<HalfUnitLayout.Unit> units = new ArrayList<>();
        for (ParameterLayout.Unit u : layout.units()) {
            List<HalfUnitLayout.Piece> pieces = new ArrayList<>();
            for (ParameterLayout.Segment s : u.segments()) {
                pieces.add(new HalfUnitLayout.Piece(s.offset(), s.count(), s.packed()));
            }
            units.add(new HalfUnitLayout.Unit(pieces, u.index() != ParameterLayout.EMBEDDING));
        }
        return units;
    }

    /** Bytes of the gradients of {@code config} stored this way, without allocating them. */
    public static long gradientBytes(GptConfig config) {
        ParameterLayout layout = new ParameterLayout(config);
        return HalfGradients.bytes(units(layout), layout.count());
    }

    /** The 16-bit gradients. */
    public HalfGradients gradients() {
        return grads;
    }

    @Override
    public MemorySegment wholeParams() {
        return params;
    }

    @Override
    public MemorySegment param(Param p, int layer) {
        return params.asSlice(layout.offset(p, layer) * Float.BYTES, layout.count(p, layer) * Float.BYTES);
    }

    @Override
    public MemorySegment grad(Param p, int layer) {
        return grads.grad(layout.unitOf(p, layer), layout.offset(p, layer), layout.count(p, layer));
    }

    @Override
    public void acquire(int unit) { }

    @Override
    public void prefetch(int unit) { }

    @Override
    public void release(int unit) { }

    @Override
    public void zeroGrad() {
        grads.zero();
    }

    @Override
    public void beginGradients(int unit) {
        grads.begin(unit);
    }

    @Override
    public void gradientsDone(int unit) {
        grads.done(unit);
    }

    @Override
    public long bytes() {
        return params.byteSize() + grads.bytes();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            grads.close();
        } finally {
            arena.close();
        }
    }
}
