package io.accel4j.nn;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A module run inside the {@link Units} brackets of one unit, transparent otherwise (no name of its own, the child's
 * widths and gradient convention). Forward: acquire, prefetch the next unit, the child, release. Backward, by
 * {@link Backward}: {@link Backward#FULL} (acquire, prefetch, begin the gradients, the child, release, gradients done,
 * then tell the pass's listener the unit is final), {@link Backward#OPENS} (the unit's gradients begin here and end in
 * a later scope of the same unit: a tied head before its embedding), {@link Backward#CLOSES} (reads no parameters, only
 * ends the gradients the earlier scope opened).
 */
public final class UnitScope implements Module {

    /** What a scope's backward brackets. */
    public enum Backward { FULL, OPENS, CLOSES }

    private final Module child;
    private final int unit;
    private final int prefetchForward;
    private final int prefetchBackward;
    private final Backward backward;
    private final int reported;
    /** The parameter tensors the child declared (table indices {@code [firstParam, endParam)}), set by build. */
    private int firstParam;
    private int endParam;

    /**
     * {@code child} in unit {@code unit}, hinting {@code prefetchForward} after its forward's acquire and
     * {@code prefetchBackward} after its backward's (−1: none); {@code reported} is what the pass's gradient listener
     * is told once the unit's gradients are done (−2: nothing).
     */
    public UnitScope(Module child, int unit, int prefetchForward, int prefetchBackward, Backward backward,
                     int reported) {
        this.child = java.util.Objects.requireNonNull(child, "child");
        this.unit = unit;
        this.prefetchForward = prefetchForward;
        this.prefetchBackward = prefetchBackward;
        this.backward = java.util.Objects.requireNonNull(backward, "backward");
        this.reported = reported;
    }

    @Override
    public String name() {
        return "";
    }

    /**
     * {@code body}'s children, each in a unit of its own numbered in order, forward prefetching the next and backward
     * the one before: a network of these units gathers one child's parameters at a time (ZeRO-3 for a module tree).
     * Their gradients are final once each child's backward ends, so each scope reports its unit to the pass's listener.
     */
    public static Sequential perChild(Sequential body) {
        List<Module> children = body.children();
        int n = children.size();
        List<Module> scoped = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            scoped.add(new UnitScope(children.get(i), i, i + 1 < n ? i + 1 : -1, i > 0 ? i - 1 : -1, Backward.FULL,
                    i));
        }
        return new Sequential(body.name(), scoped);
    }

    /** The unit. */
    public int unit() {
        return unit;
    }

    /** What the pass's gradient listener is told once the unit's gradients are done (−2: nothing). */
    public int reported() {
        return backward == Backward.OPENS ? -2 : reported;
    }

    /** The table indices of the parameter tensors the child declared, {@code [first, end)}, once built. */
    public int[] declared() {
        return new int[] {firstParam, endParam};
    }

    @Override
    public int build(Builder b, int inWidth) {
        firstParam = b.params().size();
        b.unitScope(unit, backward);
        int out = b.childInUnit(child, inWidth, unit);
        endParam = b.params().size();
        return out;
    }

    @Override
    public boolean gradientInPlace() {
        return child.gradientInPlace();
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        Units u = p.units();
        u.acquire(unit);
        if (prefetchForward >= 0) {
            u.prefetch(prefetchForward);
        }
        child.forward(p, in, out);
        u.release(unit);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        Units u = p.units();
        if (backward == Backward.CLOSES) {
            child.backward(p, in, out, dout, din);
        } else {
            u.acquire(unit);
            if (prefetchBackward >= 0) {
                u.prefetch(prefetchBackward);
            }
            u.beginGradients(unit);
            child.backward(p, in, out, dout, din);
            u.release(unit);
        }
        if (backward != Backward.OPENS) {
            u.gradientsDone(unit);
            if (reported != -2) {
                p.gradientsDone(reported);
            }
        }
    }
}
