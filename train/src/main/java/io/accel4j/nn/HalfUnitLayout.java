package io.accel4j.nn;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Where each element of a vector cut into units lives when the <em>half</em> units are stored in 16 bits and the
 * <em>wide</em> ones in fp32: the layout {@link HalfGradients} and {@link HalfParameters} share. A unit is a list of
 * pieces of the vector, packed one after another from 0 in the unit's fp32 working region; the units cover
 * {@code [0, count)} exactly, each element once. In vector order, the half pieces are packed one after another in the
 * 16-bit store ({@code narrow}) and the wide ones in the fp32 copy ({@code wide}).
 *
 * <p>Element counts only: the store that holds the buffers says what an element costs in bytes. Immutable.
 */
public final class HalfUnitLayout {

    /** Elements {@code [offset, offset + count)} of the vector, at {@code packed} in its unit's working region. */
    public record Piece(long offset, long count, long packed) {}

    /** A unit: its pieces, and whether its elements are stored in 16 bits (else fp32, wide). */
    public record Unit(List<Piece> pieces, boolean half) {
        public Unit {
            pieces = List.copyOf(pieces);
        }

        /** Elements of the unit. */
        long count() {
            long n = 0;
            for (Piece p : pieces) {
                n += p.count();
            }
            return n;
        }
    }

    /** A piece in vector order: where it is stored (in the 16-bit store if {@code half}, else the wide copy). */
    record Span(long offset, long count, boolean half, long at) {}

    private final List<Unit> units;
    private final Span[] spans;
    /** Per unit, per piece: where it is stored ({@link Span#at}). */
    private final long[][] storedAt;
    private final long wide;
    private final long narrow;
    private final long work;
    private final long halfPiece;
    private final long widePiece;

    /**
     * The layout of {@code units} over {@code count} elements; {@code what} names the elements in the messages
     * ("gradients", "parameters").
     *
     * @throws IllegalArgumentException for pieces not packed from 0 in their unit, or units that do not cover the
     *     vector exactly
     */
    HalfUnitLayout(List<Unit> units, long count, String what) {
        this.units = List.copyOf(units);
        List<Piece> all = new ArrayList<>();
        long wideN = 0, narrowN = 0, workN = 0, halfMax = 0, wideMax = 0;
        for (Unit u : this.units) {
            long n = 0;
            for (Piece p : u.pieces()) {
                if (p.offset() < 0 || p.count() < 0 || p.packed() != n) {
                    throw new IllegalArgumentException("piece " + p + " of a unit: pieces must be packed one after "
                            + "another from 0 (expected packed " + n + ")");
                }
                n = Math.addExact(n, p.count());
                all.add(p);
                if (u.half()) {
                    halfMax = Math.max(halfMax, p.count());
                } else {
                    wideMax = Math.max(wideMax, p.count());
                }
            }
            if (u.half()) {
                narrowN += n;
                workN = Math.max(workN, n);
            } else {
                wideN += n;
            }
        }
        all.sort(Comparator.comparingLong(Piece::offset));
        long at = 0;
        for (Piece p : all) {
            if (p.offset() != at) {
                throw new IllegalArgumentException("the units must cover the " + count + " " + what + " once each: "
                        + "element " + (p.offset() > at ? at + " is in no unit" : p.offset() + " is in two"));
            }
            at += p.count();
        }
        if (at != count) {
            throw new IllegalArgumentException("the units cover " + at + " " + what + ", the vector has " + count);
        }
        this.wide = wideN;
        this.narrow = narrowN;
        this.work = workN;
        this.halfPiece = halfMax;
        this.widePiece = wideMax;

        this.storedAt = new long[this.units.size()][];
        List<long[]> order = new ArrayList<>(); // {offset, unit, piece}
        for (int u = 0; u < this.units.size(); u++) {
            storedAt[u] = new long[this.units.get(u).pieces().size()];
            for (int i = 0; i < storedAt[u].length; i++) {
                order.add(new long[] {this.units.get(u).pieces().get(i).offset(), u, i});
            }
        }
        order.sort(Comparator.comparingLong(a -> a[0]));
        List<Span> list = new ArrayList<>();
        long wideAt = 0, narrowAt = 0;
        for (long[] o : order) {
            Unit unit = this.units.get((int) o[1]);
            Piece p = unit.pieces().get((int) o[2]);
            long stored = unit.half() ? narrowAt : wideAt;
            storedAt[(int) o[1]][(int) o[2]] = stored;
            list.add(new Span(p.offset(), p.count(), unit.half(), stored));
            if (unit.half()) {
                narrowAt += p.count();
            } else {
                wideAt += p.count();
            }
        }
        this.spans = list.toArray(Span[]::new);
    }

    /** Elements stored wide (fp32): those of the wide units. */
    long wide() {
        return wide;
    }

    /** Elements stored in 16 bits: those of the half units. */
    long narrow() {
        return narrow;
    }

    /** Elements of the largest half unit: the fp32 working region one half unit at a time needs. */
    long work() {
        return work;
    }

    /** Elements of the largest piece of a half unit ({@code half}) or of a wide one. */
    long largestPiece(boolean half) {
        return half ? halfPiece : widePiece;
    }

    /** The pieces in vector order, with where each is stored. */
    Span[] spans() {
        return spans;
    }

    /** Unit {@code u}. */
    Unit unit(int u) {
        if (u < 0 || u >= units.size()) {
            throw new IllegalArgumentException("unit " + u + " is not in [0, " + units.size() + ")");
        }
        return units.get(u);
    }

    /** Units in the layout. */
    int size() {
        return units.size();
    }

    /** Where piece {@code i} of unit {@code u} is stored (elements into the 16-bit store or the wide copy). */
    long storedAt(int u, int i) {
        return storedAt[u][i];
    }

    /**
     * The fp32 values of elements {@code [offset, offset + n)} of unit {@code u}, inside one of its pieces: in
     * {@code work} (the working region, packed) for a half unit, in {@code wide} (the fp32 copy) for a wide one.
     *
     * @throws IllegalArgumentException when no one piece of the unit holds them all
     */
    MemorySegment fp32(int u, long offset, long n, MemorySegment work, MemorySegment wide) {
        Unit unit = unit(u);
        for (int i = 0; i < unit.pieces().size(); i++) {
            Piece p = unit.pieces().get(i);
            if (offset >= p.offset() && offset + n <= p.offset() + p.count()) {
                long d = offset - p.offset();
                return unit.half() ? work.asSlice((p.packed() + d) * Float.BYTES, n * Float.BYTES)
                        : wide.asSlice((storedAt[u][i] + d) * Float.BYTES, n * Float.BYTES);
            }
        }
        throw new IllegalArgumentException("elements [" + offset + ", " + (offset + n) + ") are not inside one piece "
                + "of unit " + u);
    }
}
