package io.accel4j.nn;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The activation memory of a network for up to {@code maxRows} positions, computed from the module tree before anything
 * is allocated: one region per declared activation of {@code maxRows × perRow} floats, each rounded up to 16 floats
 * (64 bytes); a shared region (a key several modules declare: gradient scratch, or the activations a recomputing
 * block holds for one layer only) is as wide as its widest declaration. {@link #bytes()} is exactly what the network
 * allocates for them.
 */
public final class ActivationPlan {

    /** One region: {@code perRow} floats for each of {@code maxRows} positions, at float {@code offset}. */
    public record Region(String name, long perRow, long offset, long floats, boolean shared) {}

    private final List<Region> regions;
    private final long floats;
    private final long maxRows;

    private ActivationPlan(List<Region> regions, long floats, long maxRows) {
        this.regions = List.copyOf(regions);
        this.floats = floats;
        this.maxRows = maxRows;
    }

    /** Collects declarations in order; {@link #plan} lays them out. */
    static final class Declarations {
        private final Map<String, long[]> shared = new LinkedHashMap<>(); // key -> {index, perRow}
        private final List<String> names = new ArrayList<>();
        private final List<Long> perRow = new ArrayList<>();
        private final List<Boolean> isShared = new ArrayList<>();
        final Object owner = new Object();

        ActRef own(String name, long floatsPerRow) {
            names.add(name);
            perRow.add(floatsPerRow);
            isShared.add(false);
            return new ActRef(names.size() - 1, name, floatsPerRow, owner);
        }

        ActRef shared(String key, long floatsPerRow) {
            long[] known = shared.get(key);
            if (known == null) {
                names.add(key);
                perRow.add(floatsPerRow);
                isShared.add(true);
                shared.put(key, new long[] {names.size() - 1, floatsPerRow});
                return new ActRef(names.size() - 1, key, floatsPerRow, owner);
            }
            int i = (int) known[0];
            perRow.set(i, Math.max(perRow.get(i), floatsPerRow));
            return new ActRef(i, key, floatsPerRow, owner);
        }

        ActivationPlan plan(long maxRows) {
            List<Region> out = new ArrayList<>(names.size());
            long at = 0;
            for (int i = 0; i < names.size(); i++) {
                long n = Math.multiplyExact(maxRows, perRow.get(i));
                long rounded = Math.addExact(n, 15) / 16 * 16;
                out.add(new Region(names.get(i), perRow.get(i), at, rounded, isShared.get(i)));
                at = Math.addExact(at, rounded);
            }
            return new ActivationPlan(out, at, maxRows);
        }
    }

    /** The regions, in declaration order. */
    public List<Region> regions() {
        return regions;
    }

    /** Floats of all regions. */
    public long floats() {
        return floats;
    }

    /** Bytes of all regions: what the network allocates for activations and gradient scratch. */
    public long bytes() {
        return Math.multiplyExact(floats, (long) Float.BYTES);
    }

    /** The positions the plan is for. */
    public long maxRows() {
        return maxRows;
    }
}
