package io.accel4j.nn;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;

/**
 * A {@link Network}'s parameters stored in bf16 ({@link NetworkSpec#parameterStorage}): a {@link HalfParameters} laid
 * out as the 16-bit gradients are ({@link HalfGradientSource.Layout}: every unit whose {@link UnitScope}s each open
 * and close it in one backward is a half unit, widened into the shared fp32 working region between the brackets its
 * scopes make, {@link #acquire} … {@link #release}; the rest — a tied embedding's unit, parameters outside any unit —
 * one wide unit, an fp32 copy of bf16 values). The gradients are the network's flat fp32 buffer, or its 16-bit ones
 * ({@code half}, whose brackets and zeroing this source passes on). There is no fp32 parameter vector: the fp32 master
 * weights are the optimizer's ({@code optim.Bf16StoreAdamW}), which writes the store.
 */
final class HalfParameterSource implements ParameterSource, Units, AutoCloseable {

    private final HalfParameters store;
    /** fp32 gradients, or null when {@link #half} holds them. */
    private final MemorySegment grads;
    private final HalfGradientSource half;
    private final DeviceMemory memory;
    /** Per tensor (declaration order): its store unit, first element and count. */
    private final int[] unitOf;
    private final long[] offset;
    private final long[] count;
    /** The tree's unit → the store's (half units only). */
    private final java.util.Map<Integer, Integer> index;

    /**
     * The bf16 store of {@code table}'s parameters over the tree's units ({@code declaredIn}: each tensor's unit or
     * −1; {@code full}: the units a scope opens and closes in one backward), zeroed, in {@code ops}' memory; the
     * gradients in {@code grads} (fp32, laid out as the table) or, when it is null, in {@code half}.
     *
     * @throws IllegalArgumentException for a tree without such a unit
     */
    HalfParameterSource(Ops ops, ParameterTable table, List<Integer> declaredIn, Set<Integer> full,
                        MemorySegment grads, HalfGradientSource half) {
        HalfGradientSource.Layout l = layout(table, declaredIn, full);
        this.memory = ops.memory();
        this.grads = grads;
        this.half = half;
        this.index = l.index();
        this.unitOf = l.unitOf();
        int n = table.entries().size();
        this.offset = new long[n];
        this.count = new long[n];
        for (int i = 0; i < n; i++) {
            offset[i] = table.entries().get(i).offset();
            count[i] = table.entries().get(i).count();
        }
        this.store = new HalfParameters(ops, table.count(), l.units());
    }

    /** The bytes the store of {@code table} over these units takes ({@link HalfParameters#bytes}), unallocated. */
    static long bytes(ParameterTable table, List<Integer> declaredIn, Set<Integer> full) {
        return HalfParameters.bytes(layout(table, declaredIn, full).units(), table.count());
    }

    private static HalfGradientSource.Layout layout(ParameterTable table, List<Integer> declaredIn, Set<Integer> full) {
        return HalfGradientSource.layout(table, declaredIn, full, "bf16 parameter storage keeps the parameters",
                "keep fp32 parameters");
    }

    /** The bf16 store. */
    HalfParameters store() {
        return store;
    }

    @Override
    public MemorySegment param(int i) {
        return store.param(unitOf[i], offset[i], count[i]);
    }

    @Override
    public MemorySegment grad(int i) {
        return half != null ? half.grad(i) : grads.asSlice(offset[i] * Float.BYTES, count[i] * Float.BYTES);
    }

    @Override
    public void acquire(int unit) {
        Integer s = index.get(unit);
        if (s != null) {
            store.acquire(s);
        }
    }

    @Override
    public void prefetch(int unit) {
    }

    @Override
    public void release(int unit) {
        Integer s = index.get(unit);
        if (s != null) {
            store.release(s);
        }
    }

    @Override
    public void beginGradients(int unit) {
        if (half != null) {
            half.beginGradients(unit);
        }
    }

    @Override
    public void gradientsDone(int unit) {
        if (half != null) {
            half.gradientsDone(unit);
        }
    }

    @Override
    public void zeroGrad() {
        if (half != null) {
            half.zeroGrad();
        } else {
            memory.zero(grads);
        }
    }

    /** Bytes of the store and of the gradients (fp32, or the 16-bit store's). */
    long bytes() {
        return store.bytes() + (half != null ? half.gradients().bytes() : grads.byteSize());
    }

    /** Closes the store (the 16-bit gradients are the network's to close). */
    @Override
    public void close() {
        store.close();
    }
}
