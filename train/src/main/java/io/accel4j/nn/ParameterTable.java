package io.accel4j.nn;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.ToIntFunction;

/**
 * Where each parameter tensor of a network lives in its one flat fp32 parameter buffer (and, at the same offsets, in
 * its gradient buffer): the tensors are packed one after another, without padding, in the order the
 * {@link Order} gives — declaration order by default, or grouped by role (llm.c's GPT-2 file stacks each kind of
 * tensor over the layers: all ln1w, then all ln1b, …), so that a checkpoint file is the buffer as it is.
 *
 * <p>Counts and offsets are elements, as {@code long}. Immutable once built.
 */
public final class ParameterTable {

    /**
     * One tensor.
     *
     * @param name    full name, e.g. {@code h.0.attn.c_attn.weight}
     * @param dims    shape, outermost first (a copy is kept)
     * @param decays  whether weight decay applies (by default the matrices: 2-D and larger; not biases, gains,
     *                nor — by {@link Builder} convention — embeddings unless asked)
     * @param lrScale the learning-rate multiplier of its group (1 by default)
     * @param init    how it starts
     * @param offset  first element in the flat buffer
     * @param count   elements
     */
    public record Entry(String name, long[] dims, boolean decays, float lrScale, Init init, long offset, long count) {

        public Entry {
            dims = dims.clone();
        }

        /** The shape, outermost first. */
        @Override
        public long[] dims() {
            return dims.clone();
        }

        @Override
        public String toString() {
            return name + Arrays.toString(dims) + "@" + offset;
        }
    }

    /** How tensors are ordered in the flat buffer. */
    @FunctionalInterface
    public interface Order {

        /** A sort key per tensor name: tensors are packed by key, then by declaration order within a key. */
        int key(String name);

        /** Declaration order. */
        static Order declaration() {
            return name -> 0;
        }

        /** Grouped: all tensors of key 0 first (in declaration order), then key 1, … */
        static Order grouped(ToIntFunction<String> key) {
            return key::applyAsInt;
        }
    }

    private final List<Entry> entries; // declaration order
    private final Map<String, Integer> byName;
    private final long count;

    ParameterTable(List<Builder.ParamDecl> decls, Order order) {
        Integer[] idx = new Integer[decls.size()];
        for (int i = 0; i < idx.length; i++) {
            idx[i] = i;
        }
        int[] keys = new int[decls.size()];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = order.key(decls.get(i).name());
        }
        Arrays.sort(idx, Comparator.<Integer>comparingInt(i -> keys[i]).thenComparingInt(i -> i));
        long[] offsets = new long[decls.size()];
        long at = 0;
        for (int i : idx) {
            offsets[i] = at;
            at = Math.addExact(at, decls.get(i).count());
        }
        List<Entry> list = new ArrayList<>(decls.size());
        Map<String, Integer> names = new java.util.HashMap<>();
        for (int i = 0; i < decls.size(); i++) {
            Builder.ParamDecl d = decls.get(i);
            list.add(new Entry(d.name(), d.dims(), d.decays(), d.lrScale(), d.init(), offsets[i], d.count()));
            names.put(d.name(), i);
        }
        this.entries = List.copyOf(list);
        this.byName = Map.copyOf(names);
        this.count = at;
    }

    /** The tensors in declaration order (the index of a {@link ParamRef}). */
    public List<Entry> entries() {
        return entries;
    }

    /** The tensors in buffer order. */
    public List<Entry> inBufferOrder() {
        List<Entry> sorted = new ArrayList<>(entries);
        sorted.sort(Comparator.comparingLong(Entry::offset));
        return sorted;
    }

    /** The tensor named {@code name}. */
    public Entry entry(String name) {
        Integer i = byName.get(name);
        if (i == null) {
            throw new IllegalArgumentException("no parameter named '" + name + "'");
        }
        return entries.get(i);
    }

    /** The tensor of {@code ref}. */
    public Entry entry(ParamRef ref) {
        return entries.get(ref.index());
    }

    /** Total elements in the flat buffer. */
    public long count() {
        return count;
    }

    /** Bytes of the flat buffer in fp32. */
    public long fp32Bytes() {
        return Math.multiplyExact(count, (long) Float.BYTES);
    }

    /**
     * Maximal runs of the buffer whose tensors share weight decay and learning-rate multiplier, in buffer order: an
     * optimizer makes one fused call per run (or per multiplier).
     */
    public List<Group> groups() {
        List<Group> runs = new ArrayList<>();
        for (Entry e : inBufferOrder()) {
            if (e.count() == 0) {
                continue;
            }
            Group last = runs.isEmpty() ? null : runs.get(runs.size() - 1);
            if (last != null && last.decays() == e.decays() && last.lrScale() == e.lrScale()
                    && last.offset() + last.length() == e.offset()) {
                runs.set(runs.size() - 1, new Group(last.offset(), last.length() + e.count(), e.decays(), e.lrScale()));
            } else {
                runs.add(new Group(e.offset(), e.count(), e.decays(), e.lrScale()));
            }
        }
        return List.copyOf(runs);
    }

    /**
     * Elements {@code [offset, offset + length)} of the buffer, updated with weight decay when {@code decays}, at the
     * learning rate times {@code lrScale}.
     */
    public record Group(long offset, long length, boolean decays, float lrScale) {}

    /**
     * Throws unless {@code other} has the same tensors (names, shapes, order): a checkpoint of one network can only
     * be resumed into a network of the same tree.
     *
     * @throws ShapeException naming the first tensor that differs and both shapes
     */
    public void checkSameAs(ParameterTable other, String otherName) {
        List<Entry> a = inBufferOrder(), b = other.inBufferOrder();
        for (int i = 0; i < Math.max(a.size(), b.size()); i++) {
            Entry x = i < a.size() ? a.get(i) : null, y = i < b.size() ? b.get(i) : null;
            if (x == null || y == null || !x.name().equals(y.name()) || !Arrays.equals(x.dims(), y.dims())) {
                throw new ShapeException(otherName + " has parameter " + (y == null ? "(none)" : y) + " where this "
                        + "network has " + (x == null ? "(none)" : x) + ": it is for another module tree");
            }
        }
    }
}
