package io.accel4j.nn;

import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;

/**
 * GPT-2's MLP: {@code out = c_proj(gelu(c_fc(in)))}, C → hidden → C, the GELU fused into c_fc's GEMM forward and into
 * c_proj's GEMM backward ({@link io.accel4j.core.ops.MatmulOps#matmulBackwardGelu}); under FP8, unfused. Under {@link Recompute#GELU} the
 * GELU's output is held for one layer only (one region for every MLP) and recomputed from the kept pre-activation
 * when another MLP's forward overwrote it.
 *
 * <p>Parameters: {@code c_fc.weight (hidden, C)}, {@code c_fc.bias (hidden)}, {@code c_proj.weight (C, hidden)},
 * {@code c_proj.bias (C)}.
 */
public final class Mlp implements Module {

    private static final String HELD_GELU = "mlp.gelu-held-for-one-layer";

    private final String name;
    private final int C;
    private final int hidden;
    private final Linear fc;
    private final Linear proj;
    private ActRef gelu;
    private ActRef dpre;
    private ActRef dhidden;
    private boolean recomputeGelu;

    public Mlp(String name, int C, int hidden) {
        this.name = name;
        this.C = C;
        this.hidden = hidden;
        this.fc = Linear.gelu("c_fc", C, hidden).fusedByParent();
        this.proj = Linear.of("c_proj", hidden, C);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        b.child(fc, C);
        recomputeGelu = b.recompute() == Recompute.GELU;
        gelu = recomputeGelu ? b.shared(HELD_GELU, hidden) : b.activation("gelu", hidden);
        b.child(proj, hidden, true); // its din is this module's scratch
        dpre = b.shared("mlp.dpre", hidden);
        dhidden = b.fp8() ? b.shared("mlp.dhidden", hidden) : null;
        return C;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment h = p.act(gelu);
        fc.forward(p, in, h);
        proj.forward(p, h, out);
        if (recomputeGelu) {
            p.hold(HELD_GELU, this);
        }
    }

    /** The forward up to the hidden activation (what backward reads), for a block recomputing its layer. */
    void forwardHidden(Pass p, MemorySegment in) {
        fc.forward(p, in, p.act(gelu));
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment h = p.act(gelu), pre = p.act(fc.pre());
        if (recomputeGelu && p.holder(HELD_GELU) != this) {
            p.ops().geluForward(h, pre, (long) p.rows() * hidden);
            p.hold(HELD_GELU, this);
        }
        if (proj.fp8(p)) { // FP8 has no fused form: c_proj's backward, then c_fc's with its GELU
            MemorySegment dh = p.zeroed(dhidden);
            proj.backward(p, h, out, dout, dh);
            fc.backward(p, in, h, dh, din);
            return;
        }
        MemorySegment g = p.act(dpre); // written by the fused call, not added to
        p.ops().matmulBackwardGelu(g, p.grad(fc.bias()), p.grad(proj.weight()), p.grad(proj.bias()), dout, h, pre,
                p.param(proj.weight()), p.rows(), hidden, C, p.matmulOperands());
        fc.backwardOf(p, in, g, din, null); // its bias gradient came with the fused call
    }
}
