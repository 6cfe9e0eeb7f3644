package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/** The tanh approximation of GELU, element-wise: {@code out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))}. */
public final class Gelu implements Module {

    private final String name;
    private int width;

    public Gelu(String name) {
        this.name = name;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        this.width = inWidth;
        return inWidth;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        p.ops().geluForward(out, in, (long) p.rows() * width);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        if (din != null) {
            p.ops().geluBackward(din, in, dout, (long) p.rows() * width);
        }
    }
}
