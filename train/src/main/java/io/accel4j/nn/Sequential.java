package io.accel4j.nn;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Modules applied one after another: child i's output is child i+1's input. Keeps each child's output (but the last,
 * which is the sequence's) for backward; backward runs the children in reverse, handing each the gradient of its
 * output and a zeroed buffer for its input's (two buffers, used in turn), except that a child whose gradient is in
 * place ({@link Module#gradientInPlace()}, a residual block) updates the buffer it was given. A sequence of such
 * children is itself in place.
 */
public final class Sequential implements Module {

    private final String name;
    private final List<Module> children;
    private ActRef[] outputs; // child i's output, i < n-1
    private int[] widths;     // widths[i]: child i's input width; widths[n]: the output's
    private ActRef[] grads;   // the two gradient buffers, or none when every child is in place

    public Sequential(String name, Module... children) {
        this(name, List.of(children));
    }

    public Sequential(String name, List<? extends Module> children) {
        if (children.isEmpty()) {
            throw new ShapeException("sequential '" + name + "' has no modules");
        }
        this.name = name;
        this.children = List.copyOf(children);
    }

    /** The children, in order. */
    public List<Module> children() {
        return children;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        int n = children.size();
        outputs = new ActRef[n];
        widths = new int[n + 1];
        widths[0] = inWidth;
        long widest = 0;
        for (int i = 0; i < n; i++) {
            Module c = children.get(i);
            widths[i + 1] = b.child(c, widths[i], i > 0 || b.inputGradient());
            if (i < n - 1) {
                outputs[i] = b.activation((c.name().isEmpty() ? "#" + i : c.name()) + ".out", widths[i + 1]);
            }
            if (i > 0 && !c.gradientInPlace()) {
                widest = Math.max(widest, widths[i]);
            }
        }
        grads = widest == 0 ? new ActRef[0]
                : new ActRef[] {b.activation("grad0", widest), b.activation("grad1", widest)};
        return widths[n];
    }

    @Override
    public boolean gradientInPlace() {
        return children.stream().allMatch(Module::gradientInPlace);
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment cur = in;
        int n = children.size();
        for (int i = 0; i < n; i++) {
            MemorySegment o = i == n - 1 ? out : p.act(outputs[i]);
            children.get(i).forward(p, cur, o);
            cur = o;
        }
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        int n = children.size(), turn = 0;
        MemorySegment g = dout;
        for (int i = n - 1; i >= 0; i--) {
            Module c = children.get(i);
            MemorySegment cin = i == 0 ? in : p.act(outputs[i - 1]), cout = i == n - 1 ? out : p.act(outputs[i]);
            if (c.gradientInPlace()) {
                c.backward(p, cin, cout, g, g);
                continue;
            }
            MemorySegment d = i == 0 ? din : zeroedGrad(p, turn++ & 1, widths[i]);
            c.backward(p, cin, cout, g, d);
            g = d;
        }
        if (din != null && g != din) { // the first child was in place on a buffer of ours: din += its result
            p.ops().residualForward(din, din, g, (long) p.rows() * widths[0]);
        }
    }

    private MemorySegment zeroedGrad(Pass p, int which, int width) {
        MemorySegment s = p.act(grads[which], width);
        p.memory().zero(s);
        return s;
    }
}
