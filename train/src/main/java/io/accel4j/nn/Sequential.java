package io.accel4j.nn;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Modules applied one after another: child i's output is child i+1's input. Keeps each child's output (but the last,
 * which is the sequence's) for backward; backward runs the children in reverse, handing each the gradient of its
 * output and a zeroed buffer for its input's (two buffers, used in turn), except that a child whose gradient is in
 * place ({@link Module#gradientInPlace()}, a residual block) updates the buffer it was given. A sequence of such
 * children is itself in place.
 *
 * <p>A {@link #checkpointed} sequence (GPT-2's blocks) under {@code --recompute every:K}
 * ({@link io.accel4j.train.model.Recompute#segment()} = K) keeps the outputs of only every K-th child (the inputs of
 * the segments of K children); the others are held for one segment (one set of regions for all segments), and
 * backward, on reaching the top child of a segment whose outputs another segment's forward overwrote, runs the
 * segment's forward again from its kept input. Forward is deterministic, so the recomputed outputs are bit for bit
 * the ones they replace.
 */
public final class Sequential implements Module {

    private final String name;
    private final List<Module> children;
    private final boolean checkpointed;
    private int segment;      // K under every:K for a checkpointed sequence, else 0
    private ActRef[] outputs; // child i's output, i < n-1
    private int[] widths;     // widths[i]: child i's input width; widths[n]: the output's
    private ActRef[] grads;   // the two gradient buffers, or none when every child is in place

    public Sequential(String name, Module... children) {
        this(name, List.of(children));
    }

    public Sequential(String name, List<? extends Module> children) {
        this(name, children, false);
    }

    private Sequential(String name, List<? extends Module> children, boolean checkpointed) {
        if (children.isEmpty()) {
            throw new ShapeException("sequential '" + name + "' has no modules");
        }
        this.name = name;
        this.children = List.copyOf(children);
        this.checkpointed = checkpointed;
    }

    /**
     * A sequence whose children's outputs are checkpointed in segments under every:K (see the class comment); the
     * same as {@link #Sequential(String, List)} otherwise. Its children must be able to run forward again in
     * backward (no state of their own between forward and backward but their activations).
     */
    public static Sequential checkpointed(String name, List<? extends Module> children) {
        return new Sequential(name, children, true);
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
        segment = checkpointed ? b.recompute().segment() : 0;
        for (int i = 0; i < n; i++) {
            Module c = children.get(i);
            widths[i + 1] = b.child(c, widths[i], i > 0 || b.inputGradient());
            if (i < n - 1) {
                outputs[i] = segment > 0 && !segmentEnd(i)
                        ? b.shared(heldKey() + "." + (i % segment), widths[i + 1])
                        : b.activation((c.name().isEmpty() ? "#" + i : c.name()) + ".out", widths[i + 1]);
            }
            if (i > 0 && !c.gradientInPlace()) {
                widest = Math.max(widest, widths[i]);
            }
        }
        grads = widest == 0 ? new ActRef[0]
                : new ActRef[] {b.activation("grad0", widest), b.activation("grad1", widest)};
        return widths[n];
    }

    /** Whether child i's output is kept under every:K: it ends a segment of K children. */
    private boolean segmentEnd(int i) {
        return (i + 1) % segment == 0;
    }

    /** The key of the regions held for one segment and of which segment holds them. */
    private String heldKey() {
        return "held-for-one-segment." + name;
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
        if (segment > 0) {
            p.hold(heldKey(), (n - 1) / segment); // the last segment's outputs are in place
        }
    }

    /**
     * Under every:K, before the backward of child {@code top}, the top child of segment {@code top / K}: its
     * children's outputs, unless they are the ones in place, recomputed from the segment's kept input.
     */
    private void refillSegment(Pass p, MemorySegment in, int top) {
        int s = top / segment;
        if (Integer.valueOf(s).equals(p.holder(heldKey()))) {
            return;
        }
        int start = s * segment;
        MemorySegment cur = start == 0 ? in : p.act(outputs[start - 1]);
        for (int j = start; j < top; j++) {
            MemorySegment o = p.act(outputs[j]);
            children.get(j).forward(p, cur, o);
            cur = o;
        }
        p.hold(heldKey(), s);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        int n = children.size(), turn = 0;
        MemorySegment g = dout;
        for (int i = n - 1; i >= 0; i--) {
            if (segment > 0 && (i == n - 1 || segmentEnd(i))) {
                refillSegment(p, in, i);
            }
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
