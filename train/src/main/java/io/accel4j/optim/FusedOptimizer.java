package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the fused optimizers share: the parameters and gradients they update (a whole vector or a ZeRO shard), their
 * groups as range lists ({@link Groups}), state buffers allocated in the backend's memory (zeroed) and freed on
 * close, and a step that makes one fused call per learning-rate multiplier ({@link #update}).
 */
abstract class FusedOptimizer implements Optimizer {

    final Ops ops;
    final MemorySegment params;
    final MemorySegment grads;
    private final Groups groups;
    private final DeviceArena arena;
    private final Map<String, MemorySegment> state = new LinkedHashMap<>();

    /**
     * State buffers {@code names}, {@code length} fp32 each, in {@code ops}' memory.
     *
     * @throws IllegalArgumentException when {@code params} or {@code grads} is not exactly the {@code length}
     *                                  parameters the groups cover (an optimizer given another network's buffers)
     */
    FusedOptimizer(Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                   String... names) {
        for (MemorySegment b : new MemorySegment[] {params, grads}) {
            if (b.byteSize() != length * Float.BYTES) {
                throw new IllegalArgumentException("the optimizer's " + (b == params ? "params" : "grads")
                        + " hold " + b.byteSize() / Float.BYTES + " fp32 values, the parameter table it was given "
                        + "covers " + length + ": pass the buffers of the network whose table it is");
            }
        }
        this.ops = ops;
        this.groups = groups;
        this.params = params;
        this.grads = grads;
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

    /** State buffer {@code name}. */
    final MemorySegment buffer(String name) {
        return state.get(name);
    }

    @Override
    public final void step(int t, float lr, float gradScale) {
        for (int i = 0; i < groups.lrScales().size(); i++) {
            update(groups.ranges().get(i), lr * groups.lrScales().get(i), t, gradScale);
        }
        afterStep(t);
    }

    /** Called once after every group's update of step {@code t}; nothing by default. */
    void afterStep(int t) {}

    /** The arena the state lives in, for an optimizer's scratch (freed with the state). */
    final DeviceArena arena() {
        return arena;
    }

    /** One fused call over {@code ranges} at learning rate {@code lr}. */
    abstract void update(List<AdamWRange> ranges, float lr, int t, float gradScale);

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
