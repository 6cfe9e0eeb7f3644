package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A {@link Network}'s parameters in its flat fp32 buffer and its gradients in 16 bits
 * ({@link NetworkSpec#gradientStorage}): the parameters of every unit whose {@link UnitScope}s each open and close
 * its gradients in one backward ({@link UnitScope.Backward#FULL}) are a half unit of a {@link HalfGradients}; the
 * rest (parameters outside any unit, a tied embedding's unit, opened by its head and closed by itself) keep fp32
 * gradients, as one wide unit. The scopes' brackets {@link #beginGradients} and {@link #gradientsDone} expand a half
 * unit into the shared fp32 working region and round it back; {@link #grad} hands out a tensor's slice of it.
 */
final class HalfGradientSource implements ParameterSource, Units, AutoCloseable {

    private final MemorySegment params;
    private final HalfGradients grads;
    /** Per tensor (declaration order): its store unit, first element, count, and its bytes in {@code params}. */
    private final int[] unitOf;
    private final long[] offset;
    private final long[] count;
    /** The tree's unit → the store's (half units only). */
    private final Map<Integer, Integer> index;

    /**
     * The layout of a store of the tree's units ({@link HalfGradients}, {@link HalfParameters}): its units (store unit
     * 0 the wide one, then a half unit per tree unit a scope opens and closes in one backward), the tree's unit → the
     * store's ({@code index}, half units only) and each tensor's store unit ({@code unitOf}, declaration order).
     */
    record Layout(List<HalfUnitLayout.Unit> units, Map<Integer, Integer> index, int[] unitOf) {}

    HalfGradientSource(Ops ops, DType type, ParameterTable table, List<Integer> declaredIn, Set<Integer> full,
                       MemorySegment params) {
        Layout l = layout(table, declaredIn, full);
        this.params = params;
        this.index = l.index();
        this.unitOf = l.unitOf();
        int n = table.entries().size();
        this.offset = new long[n];
        this.count = new long[n];
        for (int i = 0; i < n; i++) {
            offset[i] = table.entries().get(i).offset();
            count[i] = table.entries().get(i).count();
        }
        this.grads = new HalfGradients(ops, type, table.count(), l.units());
    }

    /**
     * The bytes the 16-bit gradients of {@code table} take ({@link HalfGradients#bytes(List, long)}), without
     * allocating.
     */
    static long bytes(ParameterTable table, List<Integer> declaredIn, Set<Integer> full) {
        return HalfGradients.bytes(layout(table, declaredIn, full).units(), table.count());
    }

    private static Layout layout(ParameterTable table, List<Integer> declaredIn, Set<Integer> full) {
        return layout(table, declaredIn, full, "16-bit gradient storage keeps the gradients", "keep fp32 gradients");
    }

    /**
     * The {@link Layout} of {@code table}'s tensors over the tree's units; {@code keeps} and {@code otherwise} word the
     * refusal of a tree without a unit a scope opens and closes in one backward.
     *
     * @throws IllegalArgumentException for such a tree
     */
    static Layout layout(ParameterTable table, List<Integer> declaredIn, Set<Integer> full, String keeps,
                         String otherwise) {
        Map<Integer, Integer> index = new HashMap<>();
        List<List<HalfUnitLayout.Piece>> pieces = new ArrayList<>();
        List<Long> packed = new ArrayList<>();
        pieces.add(new ArrayList<>()); // store unit 0: the wide one
        packed.add(0L);
        int[] unitOf = new int[table.entries().size()];
        List<ParameterTable.Entry> entries = table.entries();
        Integer[] order = new Integer[entries.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, java.util.Comparator.comparingLong(i -> entries.get(i).offset()));
        for (int i : order) {
            ParameterTable.Entry e = entries.get(i);
            int u = declaredIn.get(i);
            int s = 0;
            if (u >= 0 && full.contains(u)) {
                s = index.computeIfAbsent(u, k -> {
                    pieces.add(new ArrayList<>());
                    packed.add(0L);
                    return pieces.size() - 1;
                });
            }
            unitOf[i] = s;
            pieces.get(s).add(new HalfUnitLayout.Piece(e.offset(), e.count(), packed.get(s)));
            packed.set(s, packed.get(s) + e.count());
        }
        if (index.isEmpty()) {
            throw new IllegalArgumentException(keeps + " of the units a UnitScope "
                    + "opens and closes in one backward (UnitScope.perChild, Gpt2Blocks.body), and this tree has no "
                    + "such unit: wrap its blocks in UnitScopes, or " + otherwise);
        }
        List<HalfUnitLayout.Unit> units = new ArrayList<>();
        for (int s = 0; s < pieces.size(); s++) {
            units.add(new HalfUnitLayout.Unit(pieces.get(s), s > 0));
        }
        return new Layout(units, Map.copyOf(index), unitOf);
    }

    /** The 16-bit gradients. */
    HalfGradients gradients() {
        return grads;
    }

    @Override
    public MemorySegment param(int i) {
        return params.asSlice(offset[i] * Float.BYTES, count[i] * Float.BYTES);
    }

    @Override
    public MemorySegment grad(int i) {
        return grads.grad(unitOf[i], offset[i], count[i]);
    }

    @Override
    public void acquire(int unit) {
    }

    @Override
    public void prefetch(int unit) {
    }

    @Override
    public void release(int unit) {
    }

    @Override
    public void beginGradients(int unit) {
        Integer s = index.get(unit);
        if (s != null) {
            grads.begin(s);
        }
    }

    @Override
    public void gradientsDone(int unit) {
        Integer s = index.get(unit);
        if (s != null) {
            grads.done(s);
        }
    }

    @Override
    public void zeroGrad() {
        grads.zero();
    }

    @Override
    public void close() {
        grads.close();
    }
}
