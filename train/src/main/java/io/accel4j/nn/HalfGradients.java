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
 * A gradient vector of {@code count} elements stored in 16 bits unit by unit, as {@link HalfStore} stores saved
 * activations: every kernel still accumulates in fp32. The vector is cut into units (the groups of parameters a
 * {@link UnitScope} brackets: GPT-2's embeddings, each block, the final LayerNorm), each a list of pieces of the
 * vector. A <em>half</em> unit's gradients live in a 16-bit store (BF16 or FP16, packed in vector order); while its
 * backward runs ({@link #begin} … {@link #done}) they are an fp32 working region held for one unit (the same memory
 * for every half unit, as large as the largest): {@code begin} expands the store into it ({@code castToFp32}, exact)
 * when this accumulation already added into the unit, or zeroes it on the first micro-batch, and {@code done} rounds
 * it back (round to nearest even, {@code castFromFp32}). A <em>wide</em> unit (one whose gradients stay open across
 * other units' backward: a head tied to its embedding) keeps fp32 gradients of its own.
 *
 * <p>Consumers (the norm, the overflow check, the all-reduce, the optimizer) see the vector in fp32 chunks of at most
 * {@link #CHUNK} elements ({@link #chunks}): a wide piece as it is, a half piece cast into a scratch of at most
 * {@code CHUNK} floats and, when written, rounded back. So the gradients take 2 bytes a parameter of the half units, 4
 * of the wide ones, plus one unit's fp32 working region and the chunk: {@link #bytes(List, long)}.
 *
 * <p>Each accumulation step rounds a half unit once per micro-batch (relative error ≤ 2⁻⁸ for BF16, 2⁻¹¹ for FP16 in
 * its normal range, per rounding). Not thread-safe.
 */
public final class HalfGradients implements AutoCloseable {

    /** Elements of the fp32 chunk consumers see a half piece through: 64 Ki floats, 256 KiB. */
    public static final long CHUNK = 1 << 16;

    /** Consumes one fp32 chunk: elements {@code [offset, offset + n)} of the vector in {@code fp32}. */
    @FunctionalInterface
    public interface Chunk {
        void accept(long offset, MemorySegment fp32, long n);
    }

    private final Ops ops;
    private final DeviceMemory memory;
    private final DType type;
    private final long count;
    private final HalfUnitLayout layout;
    private final boolean[] filled;
    private final DeviceArena arena;
    private final MemorySegment wide;
    private final MemorySegment narrow;
    private final MemorySegment work;
    private final MemorySegment scratch;
    private int open = -1;

    /**
     * The store of {@code units} (covering {@code [0, count)} exactly, each element once) in {@code type}, allocated
     * in {@code ops}' memory and zeroed.
     *
     * @throws IllegalArgumentException for a type other than BF16 or FP16, or units that do not cover the vector
     */
    public HalfGradients(Ops ops, DType type, long count, List<Unit> units) {
        this.ops = Objects.requireNonNull(ops, "ops");
        this.memory = ops.memory();
        this.type = checkType(type);
        this.count = count;
        this.layout = new HalfUnitLayout(units, count, "gradients");
        this.filled = new boolean[layout.size()];
        this.arena = memory.arena();
        try {
            this.wide = arena.allocate(layout.wide() * Float.BYTES);
            this.narrow = arena.allocate(layout.narrow() * 2);
            this.work = arena.allocate(layout.work() * Float.BYTES);
            this.scratch = arena.allocate(chunkElements(layout) * Float.BYTES);
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    /** {@code type} if it is BF16 or FP16. */
    public static DType checkType(DType type) {
        Objects.requireNonNull(type, "type");
        if (type != DType.BF16 && type != DType.FP16) {
            throw new IllegalArgumentException("16-bit gradients are stored in BF16 or FP16, got " + type);
        }
        return type;
    }

    /**
     * The bytes a store of {@code units} over {@code count} elements allocates: 4 a wide element, 2 a half one, 4 an
     * element of the largest half unit (the working region) and 4 × the chunk ({@link #CHUNK}, or the largest half
     * piece when that is smaller: a chunk never spans two pieces), without allocating.
     */
    public static long bytes(List<Unit> units, long count) {
        HalfUnitLayout l = new HalfUnitLayout(units, count, "gradients");
        return Math.addExact(Math.addExact(Math.multiplyExact(l.wide(), 4L), Math.multiplyExact(l.narrow(), 2L)),
                Math.multiplyExact(Math.addExact(l.work(), chunkElements(l)), 4L));
    }

    /** Elements of the chunk scratch: {@link #CHUNK}, or the largest half piece when that is smaller. */
    private static long chunkElements(HalfUnitLayout layout) {
        return Math.min(CHUNK, layout.largestPiece(true));
    }

    /** The storage type (BF16 or FP16). */
    public DType type() {
        return type;
    }

    /** Elements of the vector. */
    public long count() {
        return count;
    }

    /** Bytes this store allocated ({@link #bytes(List, long)}). */
    public long bytes() {
        return wide.byteSize() + narrow.byteSize() + work.byteSize() + scratch.byteSize();
    }

    /** Zeroes every gradient: a new accumulation starts, and each half unit's next {@link #begin} zeroes its region. */
    public void zero() {
        memory.zero(wide);
        memory.zero(narrow);
        java.util.Arrays.fill(filled, false);
        open = -1;
    }

    /**
     * Unit {@code u}'s backward is about to add into its gradients: a half unit's are expanded into the working
     * region (or it is zeroed, on the accumulation's first micro-batch); a wide unit's are where they are.
     *
     * @throws IllegalStateException when another half unit is open
     */
    public void begin(int u) {
        Unit unit = layout.unit(u);
        if (!unit.half()) {
            return;
        }
        if (open >= 0) {
            throw new IllegalStateException("unit " + u + "'s gradients begin while unit " + open + "'s are open: "
                    + "16-bit gradients hold one unit at a time in fp32");
        }
        open = u;
        if (!filled[u]) {
            memory.zero(work.asSlice(0, unit.count() * Float.BYTES));
            return;
        }
        for (int i = 0; i < unit.pieces().size(); i++) {
            Piece p = unit.pieces().get(i);
            ops.castToFp32(workSlice(p.packed(), p.count()), narrowSlice(layout.storedAt(u, i), p.count()), type, p.count(),
                    1f);
        }
    }

    /** Unit {@code u}'s backward is done: a half unit's working region is rounded into its store. */
    public void done(int u) {
        Unit unit = layout.unit(u);
        if (!unit.half()) {
            return;
        }
        if (open != u) {
            throw new IllegalStateException("unit " + u + "'s gradients end, but " + (open < 0 ? "none are open"
                    : "unit " + open + "'s are"));
        }
        for (int i = 0; i < unit.pieces().size(); i++) {
            Piece p = unit.pieces().get(i);
            ops.castFromFp32(narrowSlice(layout.storedAt(u, i), p.count()), type, workSlice(p.packed(), p.count()),
                    p.count());
        }
        filled[u] = true;
        open = -1;
    }

    /**
     * The fp32 gradients of elements {@code [offset, offset + n)} of unit {@code u}, inside one of its pieces: a wide
     * unit's own, or a half unit's working region (valid between its {@link #begin} and {@link #done}).
     *
     * @throws IllegalStateException for a half unit that is not open
     */
    public MemorySegment grad(int u, long offset, long n) {
        Unit unit = layout.unit(u);
        if (unit.half() && open != u) {
            throw new IllegalStateException("unit " + u + "'s 16-bit gradients are read outside its backward "
                    + "(between begin and done)");
        }
        return layout.fp32(u, offset, n, work, wide);
    }

    /**
     * The fp32 working region (as many floats as the largest half unit; none without one) while no unit's backward is
     * open: its contents are dead between a unit's {@link #done} and the next {@link #begin}, which refills or zeroes
     * it, so a caller may pass values through it between steps (ZeRO-1's checkpoint gathers the moments through it,
     * as the fp32 trainer passes them through its gradient buffer).
     *
     * @throws IllegalStateException while a unit is open
     */
    public MemorySegment idleWorkingRegion() {
        if (open >= 0) {
            throw new IllegalStateException("the working region holds unit " + open + "'s gradients");
        }
        return work;
    }

    /**
     * Hands {@code fn} elements {@code [from, from + length)} of the vector in order, as fp32 chunks: a wide piece's
     * own gradients (any length), a half piece's cast into the chunk scratch, {@link #CHUNK} at a time, and with
     * {@code write} rounded back into the store after {@code fn} (which may then change the chunk in place).
     */
    public void chunks(long from, long length, boolean write, Chunk fn) {
        if (from < 0 || length < 0 || from + length > count) {
            throw new IllegalArgumentException("elements [" + from + ", " + (from + length) + ") are outside the "
                    + count + " gradients");
        }
        if (open >= 0) {
            throw new IllegalStateException("the gradients are read while unit " + open + "'s backward is open");
        }
        long end = from + length;
        for (HalfUnitLayout.Span s : layout.spans()) {
            long a = Math.max(from, s.offset()), b = Math.min(end, s.offset() + s.count());
            if (a >= b) {
                continue;
            }
            long at = s.at() + a - s.offset();
            if (!s.half()) {
                fn.accept(a, wide.asSlice(at * Float.BYTES, (b - a) * Float.BYTES), b - a);
                continue;
            }
            for (long c = a; c < b; c += CHUNK) {
                long n = Math.min(CHUNK, b - c);
                MemorySegment f = scratch.asSlice(0, n * Float.BYTES), h = narrowSlice(at + c - a, n);
                ops.castToFp32(f, h, type, n, 1f);
                fn.accept(c, f, n);
                if (write) {
                    ops.castFromFp32(h, type, f, n);
                }
            }
        }
    }

    /** {@code Σ g²} of the whole vector, in double over the chunks in order (each chunk the backend's sum). */
    public double sumOfSquares() {
        double[] sum = {0};
        chunks(0, count, false, (o, f, n) -> sum[0] += ops.sumOfSquares(f, n));
        return sum[0];
    }

    /** Whether any gradient is inf or NaN (an FP16 store holds inf for what overflowed its range). */
    public boolean hasNonFinite() {
        boolean[] any = {false};
        chunks(0, count, false, (o, f, n) -> any[0] |= !any[0] && ops.hasNonFinite(f, n));
        return any[0];
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
