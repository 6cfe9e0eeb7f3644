package io.accel4j.train.parallel;

import io.accel4j.train.model.ParameterLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * The parameters a ZeRO-2/3 model uses together ("units", in the order the forward uses them) and the working buffers
 * ("slots") a rank gathers them into, for any flat parameter vector: GPT-2's ({@link #of(ParameterLayout)}: the
 * embeddings, each layer, the final LayerNorm) or a module tree's ({@code fit.UnitSharding}: each child of its top-level
 * sequence). A unit is a list of contiguous {@link Segment}s of the flat vector, packed one after another. A unit
 * either has a slot of its own ({@link Kind#OWN}: it may be used again out of order, as GPT-2's embeddings are by
 * the tied LM head, and its gradients accumulate there over a step's micro-batches) or takes its place in a
 * <em>chain</em> ({@link Kind#CHAINED}: a stack of layers used one after another), whose units alternate between two
 * shared slots, so the next one is gathered while the current one computes.
 */
public final class UnitLayout {

    /** {@code count} elements at {@code offset} of the flat vector, at {@code packed} in its unit's packing. */
    public record Segment(long offset, long count, long packed) {}

    /**
     * Where one tensor (or a layer's slice of one) is: {@code count} elements at {@code offset} of the flat vector and at
     * {@code packed} of unit {@code unit}'s packing; {@code name} for messages.
     */
    public record Place(String name, int unit, long packed, long offset, long count) {}

    /**
     * One unit.
     *
     * @param index    its number, 0 … units − 1
     * @param segments in packed order
     * @param count    elements in all
     * @param slot     the working buffer it is gathered into
     */
    public record Unit(int index, List<Segment> segments, long count, int slot) {}

    /** Whether a unit has a buffer of its own or alternates with its chain's neighbours. */
    public enum Kind { OWN, CHAINED }

    private final long count;
    private final List<Unit> units;
    private final long[] slotElements;
    private final boolean[] ownSlot;
    private final int[] chainSlots; // the chain's two slots (the same one twice for a chain of one), or none

    private UnitLayout(long count, List<Unit> units, long[] slotElements, boolean[] ownSlot, int[] chainSlots) {
        this.count = count;
        this.units = List.copyOf(units);
        this.slotElements = slotElements;
        this.ownSlot = ownSlot;
        this.chainSlots = chainSlots;
    }

    /** Units added one by one in forward order, each as the (offset, count) runs of the flat vector it holds. */
    public static final class Builder {
        private final long count;
        private final List<List<long[]>> runs = new ArrayList<>();
        private final List<Kind> kinds = new ArrayList<>();

        /** For a flat vector of {@code count} elements. */
        public Builder(long count) {
            this.count = count;
        }

        /** The next unit: {@code runs} as (offset, count) pairs of the flat vector, in packed order. */
        public Builder add(Kind kind, List<long[]> runs) {
            this.kinds.add(kind);
            this.runs.add(List.copyOf(runs));
            return this;
        }

        /**
         * The layout: own units get a slot each where they first appear, the chain its two at its first unit.
         *
         * @throws IllegalArgumentException when the units do not cover every element exactly once
         */
        public UnitLayout build() {
            List<Unit> us = new ArrayList<>();
            List<Long> slotSize = new ArrayList<>();
            List<Boolean> own = new ArrayList<>();
            int chainA = -1, chainB = -1, inChain = 0;
            long covered = 0;
            for (int i = 0; i < runs.size(); i++) {
                List<Segment> segs = new ArrayList<>();
                long packed = 0;
                for (long[] r : runs.get(i)) {
                    if (r[0] < 0 || r[1] < 0 || r[0] + r[1] > count) {
                        throw new IllegalArgumentException("unit " + i + "'s run [" + r[0] + ", " + (r[0] + r[1])
                                + ") is outside the " + count + " parameters");
                    }
                    segs.add(new Segment(r[0], r[1], packed));
                    packed += r[1];
                }
                covered += packed;
                int slot;
                if (kinds.get(i) == Kind.OWN) {
                    slot = slotSize.size();
                    slotSize.add(packed);
                    own.add(true);
                } else {
                    if (chainA < 0) {
                        chainA = slotSize.size();
                        chainB = chainA + 1;
                        slotSize.add(0L);
                        slotSize.add(0L);
                        own.add(false);
                        own.add(false);
                    }
                    slot = inChain++ % 2 == 0 ? chainA : chainB;
                    slotSize.set(slot, Math.max(slotSize.get(slot), packed));
                }
                us.add(new Unit(i, List.copyOf(segs), packed, slot));
            }
            if (covered != count) {
                throw new IllegalArgumentException("the units hold " + covered + " elements, the vector has " + count);
            }
            int[] chain = chainA < 0 ? new int[0] : inChain == 1 ? new int[] {chainA, chainA} : new int[] {chainA,
                    chainB};
            if (chainA >= 0 && inChain == 1) { // one chained unit: its second slot is never used
                slotSize.remove(chainB);
                own.remove(chainB);
                for (int i = 0; i < us.size(); i++) {
                    Unit u = us.get(i);
                    if (u.slot() > chainB) {
                        us.set(i, new Unit(u.index(), u.segments(), u.count(), u.slot() - 1));
                    }
                }
            }
            long[] sizes = slotSize.stream().mapToLong(Long::longValue).toArray();
            boolean[] owns = new boolean[own.size()];
            for (int i = 0; i < owns.length; i++) {
                owns[i] = own.get(i);
            }
            return new UnitLayout(count, us, sizes, owns, chain);
        }
    }

    /**
     * GPT-2's units ({@link ParameterLayout#units()}): the embeddings and the final LayerNorm each with a slot of its
     * own (the tied head uses wte after the last layer), the L layers a chain.
     */
    public static UnitLayout of(ParameterLayout layout) {
        Builder b = new Builder(layout.count());
        for (ParameterLayout.Unit u : layout.units()) {
            List<long[]> runs = new ArrayList<>();
            for (ParameterLayout.Segment s : u.segments()) {
                runs.add(new long[] {s.offset(), s.count()});
            }
            boolean own = u.index() == ParameterLayout.EMBEDDING || u.index() == layout.finalUnit();
            b.add(own ? Kind.OWN : Kind.CHAINED, runs);
        }
        return b.build();
    }

    /** Elements of the flat vector. */
    public long count() {
        return count;
    }

    /** Bytes of the flat vector in fp32. */
    public long fp32Bytes() {
        return Math.multiplyExact(count, (long) Float.BYTES);
    }

    /** The units in forward order. */
    public List<Unit> units() {
        return units;
    }

    /** The number of working buffers. */
    public int slots() {
        return slotElements.length;
    }

    /** Elements of working buffer {@code slot}: the largest unit it holds. */
    public long slotElements(int slot) {
        return slotElements[slot];
    }

    /** Whether unit {@code unit}'s buffer is its own (its gradients accumulate there over the micro-batches). */
    public boolean ownsSlot(int unit) {
        return ownSlot[units.get(unit).slot()];
    }

    /**
     * The chain's other slot than chained unit {@code unit}'s (free while that unit's backward finishes, as the next
     * unit backward reaches has not begun), or −1 when the chain has one slot.
     */
    public int otherChainSlot(int unit) {
        int s = units.get(unit).slot();
        if (chainSlots.length == 0 || chainSlots[0] == chainSlots[1]) {
            return -1;
        }
        return s == chainSlots[0] ? chainSlots[1] : chainSlots[0];
    }

    /** The largest chained unit, elements (0 without a chain). */
    public long largestChained() {
        long most = 0;
        for (Unit u : units) {
            if (!ownSlot[u.slot()]) {
                most = Math.max(most, u.count());
            }
        }
        return most;
    }

    /** Elements of every working buffer together (what a rank holds for one unit set: parameters, or gradients). */
    public long workingElements() {
        long sum = 0;
        for (long s : slotElements) {
            sum += s;
        }
        return sum;
    }
}
