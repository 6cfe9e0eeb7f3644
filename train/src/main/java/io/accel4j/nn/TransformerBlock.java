package io.accel4j.nn;

import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;

/**
 * A pre-LayerNorm transformer block, GPT-2's:
 * <pre>
 *   residual2 = in + attn(ln_1(in))
 *   out       = residual2 + mlp(ln_2(residual2))
 * </pre>
 * Its backward works on the residual stream's gradient in place ({@link #gradientInPlace()}): the buffer holds d(out)
 * on entry; each branch reads it and its LayerNorm's backward adds into it, leaving d(in). Under
 * {@link Recompute#LAYER} (and every:K) every activation of the block but its output is held for one layer only (one set of regions
 * for all blocks) and backward recomputes them from the block's input (up to the MLP's hidden activation) when
 * another block's forward overwrote them. Under 16-bit {@link Builder#activationStorage()} (and no layer
 * recomputation) the activations are held for one layer as well, and what backward reads comes back from the block's
 * own 16-bit {@link HalfStore} instead of being recomputed; the block's output (the residual stream) stays fp32.
 */
public final class TransformerBlock implements Module {

    private static final String HELD = "block.layer-held-for-one-layer";

    private final String name;
    private final int C;
    private final LayerNorm ln1;
    private final Module attn;
    private final LayerNorm ln2;
    private final Module mlp;
    private boolean held;
    /** How held activations come back before backward: recomputed, or expanded from this block's 16-bit store. */
    private Refill refill;
    private ActRef ln1Out;
    private ActRef attnOut;
    private ActRef residual2;
    private ActRef ln2Out;
    private ActRef mlpOut;
    private ActRef dln;

    /** A block of C channels, NH heads and an MLP of width 4C. */
    public TransformerBlock(String name, int C, int NH) {
        this(name, C, NH, 4 * C);
    }

    /** A block of C channels, NH heads and an MLP of width {@code hidden}. */
    public TransformerBlock(String name, int C, int NH, int hidden) {
        this(name, C, new CausalSelfAttention("attn", C, NH), new Mlp("mlp", C, hidden));
    }

    /**
     * A block of C channels around the given attention and MLP (each C → C, named {@code attn} and {@code mlp} for
     * GPT-2's parameter names); under {@link Recompute#LAYER} an MLP other than {@link Mlp} is recomputed whole.
     */
    public TransformerBlock(String name, int C, Module attention, Module mlp) {
        this.name = name;
        this.C = C;
        this.ln1 = new LayerNorm("ln_1", C);
        this.attn = java.util.Objects.requireNonNull(attention, "attention");
        this.ln2 = new LayerNorm("ln_2", C);
        this.mlp = java.util.Objects.requireNonNull(mlp, "mlp");
    }

    /**
     * A block whose attention and MLP are split over the network's tensor group ({@link CausalSelfAttention#parallel},
     * {@link ParallelMlp} of width {@code hidden}); LayerNorms and the residual stream are whole on every rank.
     */
    public static TransformerBlock parallel(String name, int C, int NH, int hidden) {
        return new TransformerBlock(name, C, CausalSelfAttention.parallel("attn", C, NH), new ParallelMlp("mlp", C,
                hidden));
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        boolean recomputes = b.recompute().holdsLayers();
        held = recomputes || b.activationStorage() != io.accel4j.core.DType.FP32;
        int mark = b.heldCount();
        child(b, ln1);
        ln1Out = act(b, "ln_1.out");
        child(b, attn);
        attnOut = act(b, "attn.out");
        residual2 = act(b, "residual2");
        child(b, ln2);
        ln2Out = act(b, "ln_2.out");
        child(b, mlp);
        mlpOut = act(b, "mlp.out");
        dln = b.shared("block.dln", C);
        if (recomputes) {
            refill = new Recomputed();
        } else if (held) { // what backward reads: the children's held regions and ln_1.out, residual2, ln_2.out
            java.util.List<Builder.Held> saved = new java.util.ArrayList<>(b.heldSince(mark));
            for (ActRef r : new ActRef[] {ln1Out, residual2, ln2Out}) {
                saved.add(new Builder.Held(r, false));
            }
            Stored stored = new Stored();
            b.requestStore(saved, s -> stored.store = s);
            refill = stored;
        }
        return C;
    }

    /** How a block whose activations are held for one layer gets them back before its backward. */
    private interface Refill {
        /** After the block's forward. */
        void save(Pass p);

        /** Before its backward, when another block's forward overwrote the held regions. */
        void refill(Pass p, MemorySegment in);
    }

    /** 16-bit storage: saved after the forward, expanded before the backward; no store for the top block. */
    private final class Stored implements Refill {
        private HalfStore store; // null for the top block

        @Override
        public void save(Pass p) {
            if (store != null) {
                store.save(p);
            }
        }

        @Override
        public void refill(Pass p, MemorySegment in) {
            if (store == null) {
                throw new IllegalStateException("block '" + name + "' is the top block and keeps no 16-bit store, "
                        + "but another block's forward ran after its own");
            }
            store.restore(p);
        }
    }

    /** Layer recomputation: nothing saved; the forward is run again from the block's input (up to the MLP's hidden). */
    private final class Recomputed implements Refill {
        @Override
        public void save(Pass p) {}

        @Override
        public void refill(Pass p, MemorySegment in) {
            attentionHalf(p, in);
            if (mlp instanceof Mlp m) {
                m.forwardHidden(p, p.act(ln2Out));
            } else {
                mlp.forward(p, p.act(ln2Out), p.act(mlpOut));
            }
        }
    }

    private void child(Builder b, Module m) { // every child's din is the stream or this block's dln
        if (held) {
            b.childHeldForOneLayer(m, C, true);
        } else {
            b.child(m, C, true);
        }
    }

    private ActRef act(Builder b, String what) {
        return held ? b.shared("held-for-one-layer.block." + what, C) : b.activation(what, C);
    }

    @Override
    public boolean gradientInPlace() {
        return true;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        long n = (long) p.rows() * C;
        MemorySegment r2 = p.act(residual2), m = p.act(mlpOut);
        attentionHalf(p, in);
        mlp.forward(p, p.act(ln2Out), m);
        p.ops().residualForward(out, r2, m, n);
        if (held) {
            refill.save(p);
            p.hold(HELD, this);
        }
    }

    /** ln_1, attention and the first residual add, then ln_2: everything before the MLP. */
    private void attentionHalf(Pass p, MemorySegment in) {
        MemorySegment a = p.act(ln1Out), y = p.act(attnOut), r2 = p.act(residual2);
        ln1.forward(p, in, a);
        attn.forward(p, a, y);
        p.ops().residualForward(r2, in, y, (long) p.rows() * C);
        ln2.forward(p, r2, p.act(ln2Out));
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        if (din != dout) {
            throw new IllegalArgumentException("block '" + name + "' updates the residual stream's gradient in place: "
                    + "pass din == dout");
        }
        if (held && p.holder(HELD) != this) { // another block's forward overwrote the shared activations
            refill.refill(p, in);
            p.hold(HELD, this);
        }
        MemorySegment d = p.zeroed(dln);
        mlp.backward(p, p.act(ln2Out), p.act(mlpOut), dout, d);
        ln2.backward(p, p.act(residual2), p.act(ln2Out), d, dout); // dout becomes d(residual2)
        d = p.zeroed(dln);
        attn.backward(p, p.act(ln1Out), p.act(attnOut), dout, d);
        ln1.backward(p, in, p.act(ln1Out), d, dout); // dout becomes d(in)
    }
}
