package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfUnitLayout.Piece;
import io.accel4j.nn.HalfUnitLayout.Unit;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

/**
 * A parameter vector of {@code count} elements whose working values are bf16 (the weights the forward and backward
 * compute with; the fp32 master copy is the optimizer's state), stored unit by unit as {@link HalfGradients} stores
 * gradients. The vector is cut into units (the groups of parameters a {@link UnitScope} brackets), each a list of
 * pieces. A <em>half</em> unit's values live in a bf16 store (packed in vector order); while a module reads them
 * ({@link #acquire} … {@link #release}) they are widened ({@code castToFp32}, exact) into one fp32 working region
 * shared by every half unit (as large as the largest), so every kernel still reads fp32. A <em>wide</em> unit keeps an
 * fp32 copy of its values of its own (each one a bf16 value widened): GPT-2's tied embeddings, which the encoder and
 * the LM head read at the two ends of the forward, are larger than a layer, so widening them into the shared region
 * would make it as large as they are — more than keeping them wide costs.
 *
 * <p>The region is widened again only when another unit was acquired since, or the store was written
 * ({@link #update}, {@link #load}): a unit read by its forward and straight away by its backward is widened once.
 * The optimizer writes the store through {@link #update}: a half piece's bf16 store as it is, a wide piece through a
 * bf16 scratch of at most {@link #CHUNK} values widened into its fp32 copy afterwards. So the parameters take 2 bytes
 * a parameter of the half units, 4 of the wide ones, 4 an element of the largest half unit and 2 of the scratch:
 * {@link #bytes(List, long)}. Not thread-safe.
 */
public final class HalfParameters implements AutoCloseable {

    /** Elements of the bf16 scratch a wide piece is written through: 64 Ki values, 128 KiB. */
    public static final long CHUNK = 1 << 16;

    /** Writes the bf16 values of elements {@code [offset, offset + n)} of the vector into {@code bf16}. */
    @FunctionalInterface
    public interface Writer {
        void write(long offset, MemorySegment bf16, long n);
    }

    private final Ops ops;
    private final DeviceMemory memory;
    private final long count;
    private final HalfUnitLayout layout;
    private final DeviceArena arena;
    private final MemorySegment wide;
    private final MemorySegment narrow;
    private final MemorySegment work;
    private final MemorySegment scratch;
    /** The half unit acquired now, or −1. */
    private int acquired = -1;
    /** The half unit whose values the working region holds, or −1. */
    private int resident = -1;

    /**
     * The store of {@code units} (covering {@code [0, count)} exactly, each element once), allocated in {@code ops}'
     * memory and zeroed.
     *
     * @throws IllegalArgumentException for units that do not cover the vector
     */
    public HalfParameters(Ops ops, long count, List<Unit> units) {
        this.ops = Objects.requireNonNull(ops, "ops");
        this.memory = ops.memory();
        this.count = count;
        this.layout = new HalfUnitLayout(units, count, "parameters");
        this.arena = memory.arena();
        try {
            this.wide = arena.allocate(layout.wide() * Float.BYTES);
            this.narrow = arena.allocate(layout.narrow() * 2);
            this.work = arena.allocate(layout.work() * Float.BYTES);
            this.scratch = arena.allocate(scratchElements(layout) * 2);
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    /**
     * The bytes a store of {@code units} over {@code count} elements allocates: 4 a wide element, 2 a half one, 4 an
     * element of the largest half unit (the working region), 2 × the scratch ({@link #CHUNK}, or the largest wide
     * piece when that is smaller), without allocating.
     */
    public static long bytes(List<Unit> units, long count) {
        HalfUnitLayout l = new HalfUnitLayout(units, count, "parameters");
        return Math.addExact(Math.addExact(Math.multiplyExact(l.wide(), 4L), Math.multiplyExact(l.narrow(), 2L)),
                Math.addExact(Math.multiplyExact(l.work(), 4L), Math.multiplyExact(scratchElements(l), 2L)));
    }

    /** Elements of the bf16 scratch: {@link #CHUNK}, or the largest wide piece when that is smaller. */
    private static long scratchElements(HalfUnitLayout layout) {
        return Math.min(CHUNK, layout.largestPiece(false));
    }

    /** Elements of the vector. */
    public long count() {
        return count;
    }

    /** Bytes this store allocated ({@link #bytes(List, long)}). */
    public long bytes() {
        return wide.byteSize() + narrow.byteSize() + work.byteSize() + scratch.byteSize();
    }

    /**
     * Unit {@code u}'s values are about to be read: a half unit's are widened into the working region (unless it
     * holds them already); a wide unit's are where they are.
     *
     * @throws IllegalStateException when another half unit is acquired
     */
    public void acquire(int u) {
        Unit unit = layout.unit(u);
        if (!unit.half()) {
            return;
        }
        if (acquired >= 0 && acquired != u) {
            throw new IllegalStateException("unit " + u + "'s parameters are acquired while unit " + acquired
                    + "'s are: bf16 parameters widen one unit at a time into fp32");
        }
        acquired = u;
        if (resident == u) {
            return;
        }
        for (int i = 0; i < unit.pieces().size(); i++) {
            Piece p = unit.pieces().get(i);
            ops.castToFp32(workSlice(p.packed(), p.count()), narrowSlice(layout.storedAt(u, i), p.count()), DType.BF16,
                    p.count(), 1f);
        }
        resident = u;
    }

    /** Unit {@code u}'s values are not read again until its next {@link #acquire}. */
    public void release(int u) {
        if (layout.unit(u).half() && acquired == u) {
            acquired = -1;
        }
    }

    /**
     * The fp32 values of elements {@code [offset, offset + n)} of unit {@code u}, inside one of its pieces: a wide
     * unit's own copy, or a half unit's working region (valid between its {@link #acquire} and {@link #release}).
     *
     * @throws IllegalStateException for a half unit that is not acquired
     */
    public MemorySegment param(int u, long offset, long n) {
        Unit unit = layout.unit(u);
        if (unit.half() && acquired != u) {
            throw new IllegalStateException("unit " + u + "'s bf16 parameters are read outside an acquire of it");
        }
        return layout.fp32(u, offset, n, work, wide);
    }

    /**
     * Hands {@code fn} elements {@code [from, from + length)} of the vector in order to write their bf16 values: a
     * half piece's store as it is (any length), a wide piece's through the scratch, {@link #CHUNK} at a time, widened
     * into its fp32 copy after {@code fn}. No unit may be acquired.
     */
    public void update(long from, long length, Writer fn) {
        checkRange(from, length);
        if (acquired >= 0) {
            throw new IllegalStateException("the parameters are written while unit " + acquired + "'s are acquired");
        }
        resident = -1;
        long end = from + length;
        for (HalfUnitLayout.Span s : layout.spans()) {
            long a = Math.max(from, s.offset()), b = Math.min(end, s.offset() + s.count());
            if (a >= b) {
                continue;
            }
            long at = s.at() + a - s.offset();
            if (s.half()) {
                fn.write(a, narrowSlice(at, b - a), b - a);
                continue;
            }
            for (long c = a; c < b; c += CHUNK) {
                long n = Math.min(CHUNK, b - c);
                MemorySegment h = scratch.asSlice(0, n * 2);
                fn.write(c, h, n);
                ops.castToFp32(wide.asSlice((at + c - a) * Float.BYTES, n * Float.BYTES), h, DType.BF16, n, 1f);
            }
        }
    }

    /**
     * Sets every value from {@code host}: {@code count} bf16 values in host memory in vector order (a wide piece's
     * copy gets them widened, exactly).
     */
    public void load(MemorySegment host) {
        if (host.byteSize() < count * 2) {
            throw new IllegalArgumentException("host has " + host.byteSize() + " bytes, the " + count
                    + " bf16 parameters need " + count * 2);
        }
        if (acquired >= 0) {
            throw new IllegalStateException("the parameters are set while unit " + acquired + "'s are acquired");
        }
        resident = -1;
        try (java.lang.foreign.Arena tmp = java.lang.foreign.Arena.ofConfined()) {
            for (HalfUnitLayout.Span s : layout.spans()) {
                MemorySegment src = host.asSlice(s.offset() * 2, s.count() * 2);
                if (s.half()) {
                    memory.copyToDevice(src, narrowSlice(s.at(), s.count()));
                } else {
                    MemorySegment f = tmp.allocate(s.count() * Float.BYTES, 64);
                    for (long i = 0; i < s.count(); i++) {
                        f.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i, io.accel4j.core.Bf16.toFloat(
                                src.getAtIndex(java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED, i)));
                    }
                    memory.copyToDevice(f, wide.asSlice(s.at() * Float.BYTES, s.count() * Float.BYTES));
                }
            }
        }
    }

    /** Writes every value widened to fp32 into {@code dst} ({@code count} floats in this store's memory). */
    public void widen(MemorySegment dst) {
        if (dst.byteSize() < count * Float.BYTES) {
            throw new IllegalArgumentException("dst has " + dst.byteSize() + " bytes, the " + count
                    + " parameters need " + count * Float.BYTES);
        }
        for (HalfUnitLayout.Span s : layout.spans()) {
            MemorySegment d = dst.asSlice(s.offset() * Float.BYTES, s.count() * Float.BYTES);
            if (s.half()) {
                ops.castToFp32(d, narrowSlice(s.at(), s.count()), DType.BF16, s.count(), 1f);
            } else {
                memory.copy(wide.asSlice(s.at() * Float.BYTES, s.count() * Float.BYTES), d);
            }
        }
    }

    /**
     * Writes every value widened to fp32 into {@code host} ({@code count} floats in host memory), staging each bf16
     * piece on the host: no memory of this store's backend is allocated.
     */
    public void readToHost(MemorySegment host) {
        if (host.byteSize() < count * Float.BYTES) {
            throw new IllegalArgumentException("host has " + host.byteSize() + " bytes, the " + count
                    + " parameters need " + count * Float.BYTES);
        }
        try (java.lang.foreign.Arena tmp = java.lang.foreign.Arena.ofConfined()) {
            for (HalfUnitLayout.Span s : layout.spans()) {
                MemorySegment d = host.asSlice(s.offset() * Float.BYTES, s.count() * Float.BYTES);
                if (!s.half()) {
                    memory.copyToHost(wide.asSlice(s.at() * Float.BYTES, s.count() * Float.BYTES), d);
                    continue;
                }
                MemorySegment h = tmp.allocate(s.count() * 2, 64);
                memory.copyToHost(narrowSlice(s.at(), s.count()), h);
                for (long i = 0; i < s.count(); i++) {
                    d.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, i, io.accel4j.core.Bf16.toFloat(
                            h.getAtIndex(java.lang.foreign.ValueLayout.JAVA_SHORT, i)));
                }
            }
        }
    }

    private void checkRange(long from, long length) {
        if (from < 0 || length < 0 || from + length > count) {
            throw new IllegalArgumentException("elements [" + from + ", " + (from + length) + ") are outside the "
                    + count + " parameters");
        }
    }

    private MemorySegment workSlice(long at, long n) {
        return work.asSlice(at * Float.BYTES, n * Float.BYTES);
    }

    private MemorySegment narrowSlice(long at, long n) {
        return narrow.asSlice(at * 2, n * 2);
    }

    @Override
    public void close() {
        arena.close();
    }
}
