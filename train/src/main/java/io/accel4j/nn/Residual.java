package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * A residual connection around any module of equal input and output width: {@code out = in + f(in)}. Its gradient is
 * in place ({@link Module#gradientInPlace()}): {@code d(in) = d(out) + f'ᵀ·d(out)}, f's part computed into a zeroed
 * buffer and added. ({@link TransformerBlock} has the fused form GPT-2 uses, its LayerNorms adding straight into the
 * stream.)
 */
public final class Residual implements Module {

    private final String name;
    private final Module f;
    private ActRef branch;
    private ActRef grad;
    private int width;

    public Residual(String name, Module f) {
        this.name = name;
        this.f = java.util.Objects.requireNonNull(f, "f");
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        int w = b.child(f, inWidth, true); // its din is this module's grad
        if (w != inWidth) {
            throw new ShapeException("residual '" + b.qualified("") + "': its branch '" + f.name() + "' maps "
                    + inWidth + " values per position to " + w + "; a residual needs them equal");
        }
        width = w;
        branch = b.activation("branch", w);
        grad = b.activation("grad", w);
        return w;
    }

    @Override
    public boolean gradientInPlace() {
        return true;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment y = p.act(branch);
        f.forward(p, in, y);
        p.ops().residualForward(out, in, y, (long) p.rows() * width);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment g = p.zeroed(grad);
        f.backward(p, in, p.act(branch), dout, g);
        p.ops().residualForward(dout, dout, g, (long) p.rows() * width); // in place: dout becomes d(in)
    }
}
