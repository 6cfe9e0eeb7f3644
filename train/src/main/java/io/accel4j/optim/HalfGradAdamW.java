package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link AdamW} over gradients stored in 16 bits ({@link HalfGradients}): the same fused kernel, called once per fp32
 * chunk of each range of each learning-rate group ({@link HalfGradients#chunks}), so no second, fp32 gradient buffer
 * is needed. The update is element-wise, so every element is updated exactly as {@link AdamW} would update it from
 * the same fp32 gradient; the moments {@code m}, {@code v} are fp32, one per parameter, as {@link AdamW}'s (a
 * checkpoint of either resumes into the other). Over the whole vector, or a ZeRO-1 shard {@code [offset, offset +
 * length)}: the parameters and moments of the shard only, the gradients read from the whole store at their offsets.
 */
final class HalfGradAdamW implements Optimizer {

    private final AdamW.Spec spec;
    private final Ops ops;
    private final MemorySegment params;
    private final HalfGradients grads;
    /** Where the shard starts in the vector (0 for the whole vector). */
    private final long offset;
    private final Groups groups;
    private final DeviceArena arena;
    private final Map<String, MemorySegment> state = new LinkedHashMap<>();

    /**
     * AdamW of {@code spec} over the elements {@code [offset, offset + length)} of the vector laid out by
     * {@code table}: {@code params} holds those {@code length} fp32, {@code grads} the whole vector.
     *
     * @throws IllegalArgumentException when the buffers are not the table's and the shard's sizes
     */
    HalfGradAdamW(AdamW.Spec spec, Ops ops, ParameterTable table, MemorySegment params, HalfGradients grads,
                  long offset, long length) {
        long count = table.count(), n = length;
        if (offset < 0 || length < 0 || offset + length > count) {
            throw new IllegalArgumentException("shard [" + offset + ", " + (offset + length) + ") is outside the "
                    + count + " parameters");
        }
        if (params.byteSize() != n * Float.BYTES || grads.count() != count) {
            throw new IllegalArgumentException("the optimizer's params hold " + params.byteSize() / Float.BYTES
                    + " fp32 values (its shard has " + n + ") and its 16-bit gradients " + grads.count()
                    + ", the parameter table covers " + count + ": pass the buffers of the network whose table it is");
        }
        this.offset = offset;
        this.spec = spec;
        this.ops = ops;
        this.params = params;
        this.grads = grads;
        this.groups = Groups.of(table, spec.decayAll(), offset, n);
        this.arena = ops.memory().arena();
        try {
            state.put("m", arena.allocate(n * Float.BYTES));
            state.put("v", arena.allocate(n * Float.BYTES));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    @Override
    public void step(int t, float lr, float gradScale) {
        MemorySegment m = state.get("m"), v = state.get("v");
        groups.forEachRange(lr, spec.beta1(), spec.beta2(), spec.eps(), spec.weightDecay(), (r, rc) -> {
            grads.chunks(r.offset(), r.length(), false, (o, f, n) -> ops.adamw(slice(params, o - offset, n),
                    f, slice(m, o - offset, n), slice(v, o - offset, n), o, n, rc, t, gradScale));
        });
    }

    private static MemorySegment slice(MemorySegment s, long offset, long n) {
        return s.asSlice(offset * Float.BYTES, n * Float.BYTES);
    }

    @Override
    public Map<String, MemorySegment> state() {
        return java.util.Collections.unmodifiableMap(state);
    }

    @Override
    public DeviceMemory stateMemory() {
        return ops.memory();
    }

    @Override
    public String describe() {
        return "AdamW over " + grads.type().name().toLowerCase(java.util.Locale.ROOT) + " gradients in fp32 chunks "
                + "(beta1=" + spec.beta1() + ", beta2=" + spec.beta2() + ", eps=" + spec.eps() + ", weight_decay="
                + spec.weightDecay() + (spec.decayAll() ? " on every parameter" : "") + ")";
    }

    @Override
    public void close() {
        arena.close();
    }
}
