package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the fused optimizers share: the parameters and gradients they update (a whole vector or a ZeRO shard), their
 * groups as range lists ({@link Groups}), state buffers allocated in the backend's memory (zeroed) and freed on
 * close, and a step that makes one fused call per learning-rate multiplier ({@link #update}).
 *
 * <p>Normally the parameters are packed as the gradients and the state are (one {@link Slice} over all of them, one
 * call per group). With the parameters left whole ({@link OptimizerSpec#createOverWhole}: ZeRO-2 over units, where a
 * rank keeps every parameter and only its shard of the gradients) each run is its own slice — its parameters at its
 * {@code offset} of the whole vector, its gradients and state at its {@code at} — and a group's update is one fused
 * call per run it covers, each call's ranges counted from the run's start. Every element is updated as in one call:
 * the kernels are element-wise and name each element by its {@code offset}.
 */
abstract class FusedOptimizer implements Optimizer {

    /**
     * What one fused call reads and writes: {@code length} parameters and gradients, and the state from {@code at} of
     * the state buffers ({@link #buffer(String, Slice)}).
     */
    record Slice(MemorySegment params, MemorySegment grads, long at, long length) {}

    final Ops ops;
    final MemorySegment params;
    final MemorySegment grads;
    private final Groups groups;
    /** One slice (packed parameters), or one per run (parameters whole). */
    private final List<Slice> slices;
    /** Per group, per slice: the group's ranges within the slice, counted from its start. */
    private final List<List<List<AdamWRange>>> rangesBySlice;
    private final DeviceArena arena;
    private final Map<String, MemorySegment> state = new LinkedHashMap<>();

    /**
     * State buffers {@code names}, {@code length} fp32 each, in {@code ops}' memory, the parameters packed as the
     * gradients.
     *
     * @throws IllegalArgumentException when {@code params} or {@code grads} is not exactly the {@code length}
     *                                  parameters the groups cover (an optimizer given another network's buffers)
     */
    FusedOptimizer(Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                   String... names) {
        this(ops, groups, params, grads, length, null, 0, names);
    }

    /**
     * As {@link #FusedOptimizer(Ops, Groups, MemorySegment, MemorySegment, long, String...)}, but with
     * {@code wholeRuns} non-null {@code params} is the whole vector of {@code count} parameters and each of the runs
     * (whose {@code Σ length} is {@code length}) takes its parameters at its {@code offset}.
     */
    FusedOptimizer(Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                   List<OptimizerSpec.Run> wholeRuns, long count, String... names) {
        long paramsLength = wholeRuns == null ? length : count;
        check("params", params, paramsLength, wholeRuns == null ? "the parameter table it was given covers"
                : "the whole parameter vector is");
        check("grads", grads, length, "the parameter table it was given covers");
        this.ops = ops;
        this.groups = groups;
        this.params = params;
        this.grads = grads;
        this.slices = wholeRuns == null ? List.of(new Slice(params, grads, 0, length)) : slices(wholeRuns);
        this.rangesBySlice = wholeRuns == null ? null : rangesBySlice(groups, slices);
        this.arena = ops.memory().arena();
        try {
            for (String name : names) {
                state.put(name, arena.allocate(length * Float.BYTES));
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    private static void check(String name, MemorySegment b, long length, String what) {
        if (b.byteSize() != length * Float.BYTES) {
            throw new IllegalArgumentException("the optimizer's " + name + " hold " + b.byteSize() / Float.BYTES
                    + " fp32 values, " + what + " " + length + ": pass the buffers of the network whose table it is");
        }
    }

    private List<Slice> slices(List<OptimizerSpec.Run> runs) {
        List<Slice> out = new ArrayList<>();
        for (OptimizerSpec.Run r : runs) {
            long bytes = r.length() * Float.BYTES;
            out.add(new Slice(params.asSlice(r.offset() * Float.BYTES, bytes), grads.asSlice(r.at() * Float.BYTES,
                    bytes), r.at(), r.length()));
        }
        return List.copyOf(out);
    }

    /** Each group's ranges cut at the slices' bounds, each piece's {@code start} counted from its slice's. */
    private static List<List<List<AdamWRange>>> rangesBySlice(Groups groups, List<Slice> slices) {
        List<List<List<AdamWRange>>> out = new ArrayList<>();
        for (List<AdamWRange> ranges : groups.ranges()) {
            List<List<AdamWRange>> bySlice = new ArrayList<>();
            for (Slice s : slices) {
                List<AdamWRange> in = new ArrayList<>();
                for (AdamWRange r : ranges) {
                    long a = Math.max(r.start(), s.at()), b = Math.min(r.start() + r.length(), s.at() + s.length());
                    if (a < b) {
                        in.add(new AdamWRange(a - s.at(), r.offset() + a - r.start(), b - a, r.decays()));
                    }
                }
                bySlice.add(List.copyOf(in));
            }
            out.add(List.copyOf(bySlice));
        }
        return List.copyOf(out);
    }

    /** State buffer {@code name}. */
    final MemorySegment buffer(String name) {
        return state.get(name);
    }

    /** State buffer {@code name}'s part of slice {@code s}. */
    final MemorySegment buffer(String name, Slice s) {
        MemorySegment b = state.get(name);
        return s.at() == 0 && s.length() * Float.BYTES == b.byteSize() ? b
                : b.asSlice(s.at() * Float.BYTES, s.length() * Float.BYTES);
    }

    /** The slices the updates run over: one for packed parameters, one per run for whole ones. */
    final List<Slice> slices() {
        return slices;
    }

    @Override
    public final void step(int t, float lr, float gradScale) {
        for (int i = 0; i < groups.lrScales().size(); i++) {
            float groupLr = lr * groups.lrScales().get(i);
            if (rangesBySlice == null) {
                update(slices.get(0), groups.ranges().get(i), groupLr, t, gradScale);
                continue;
            }
            for (int j = 0; j < slices.size(); j++) {
                List<AdamWRange> ranges = rangesBySlice.get(i).get(j);
                if (!ranges.isEmpty()) {
                    update(slices.get(j), ranges, groupLr, t, gradScale);
                }
            }
        }
        afterStep(t);
    }

    /** Packed parameters step in parts unless the optimizer has work after the last group ({@link #afterStep}). */
    @Override
    public boolean stepsInParts() {
        return rangesBySlice == null && !hasAfterStep();
    }

    /** Whether {@link #afterStep} does anything; false by default. */
    boolean hasAfterStep() {
        return false;
    }

    /**
     * Each group's ranges cut to {@code [from, from + count)}, one fused call per group over that part of the one
     * slice, the ranges' starts counted from {@code from} and their offsets moved with them: the kernels are
     * element-wise and name each element by its offset, so every element gets the bits {@link #step} gives it.
     */
    @Override
    public final void stepPart(int t, float lr, float gradScale, long from, long count) {
        if (!stepsInParts()) {
            throw new UnsupportedOperationException(describe() + " does not step in parts");
        }
        Slice whole = slices.get(0);
        if (from < 0 || count < 0 || from + count > whole.length()) {
            throw new IllegalArgumentException("part [" + from + ", " + (from + count) + ") is outside the optimizer's "
                    + whole.length() + " parameters");
        }
        Slice part = new Slice(params.asSlice(from * Float.BYTES, count * Float.BYTES),
                grads.asSlice(from * Float.BYTES, count * Float.BYTES), from, count);
        for (int i = 0; i < groups.lrScales().size(); i++) {
            List<AdamWRange> in = new ArrayList<>();
            for (AdamWRange r : groups.ranges().get(i)) {
                long a = Math.max(r.start(), from), b = Math.min(r.start() + r.length(), from + count);
                if (a < b) {
                    in.add(new AdamWRange(a - from, r.offset() + a - r.start(), b - a, r.decays()));
                }
            }
            if (!in.isEmpty()) {
                update(part, in, lr * groups.lrScales().get(i), t, gradScale);
            }
        }
    }

    /** Called once after every group's update of step {@code t}; nothing by default. */
    void afterStep(int t) {}

    /** The arena the state lives in, for an optimizer's scratch (freed with the state). */
    final DeviceArena arena() {
        return arena;
    }

    /** One fused call over {@code ranges} of slice {@code s} at learning rate {@code lr}. */
    abstract void update(Slice s, List<AdamWRange> ranges, float lr, int t, float gradScale);

    @Override
    public final io.accel4j.core.memory.DeviceMemory stateMemory() {
        return ops.memory();
    }

    @Override
    public final Map<String, MemorySegment> state() {
        return Collections.unmodifiableMap(state);
    }

    @Override
    public final void close() {
        arena.close();
    }
}
