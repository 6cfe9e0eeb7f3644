package io.accel4j.cpu;

import io.accel4j.core.ops.OpChecks;
import java.lang.foreign.MemorySegment;

/**
 * The precondition checks kernels make once at their entry. Messages name the argument and both numbers; a freed
 * segment gives {@link IllegalStateException}, everything else {@link IllegalArgumentException}. The checks every
 * backend makes (sizes, lengths, freed memory) are the contract's {@link OpChecks}, which these forward to; the
 * CPU's own (thread sharing, aliasing) are here.
 */
public final class Check {

    private Check() {}

    /** A thread that never runs: a segment it may access is one every pool thread may access. */
    private static final Thread ANY_OTHER_THREAD = new Thread(() -> {});

    /** {@code value ≥ 1}. */
    public static void positive(String name, long value) {
        OpChecks.positive(name, value);
    }

    /** {@code value ≥ 0}. */
    public static void nonNegative(String name, long value) {
        OpChecks.nonNegative(name, value);
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} fp32 values. Returns it. */
    public static MemorySegment floats(String name, MemorySegment seg, long n) {
        return elements(name, seg, n, Float.BYTES, "floats");
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} int32 values. */
    public static MemorySegment ints(String name, MemorySegment seg, long n) {
        return elements(name, seg, n, Integer.BYTES, "ints");
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} 16-bit values (bf16, fp16). */
    public static MemorySegment shorts(String name, MemorySegment seg, long n) {
        return elements(name, seg, n, Short.BYTES, "16-bit values");
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} elements of {@code bytes} bytes each. */
    public static MemorySegment elements(String name, MemorySegment seg, long n, int bytes, String what) {
        return OpChecks.elements(name, seg, n, bytes, what);
    }

    /** The segment's memory has not been freed. */
    public static void alive(String name, MemorySegment seg) {
        OpChecks.alive(name, seg);
    }

    /** When a kernel runs on more than one thread, {@code seg} must not be confined to its owner thread. */
    public static void shared(String name, MemorySegment seg, int threads) {
        if (threads > 1 && !seg.isAccessibleBy(ANY_OTHER_THREAD)) {
            throw new IllegalArgumentException(name + " belongs to a confined arena, which only its owner thread may "
                    + "read, but this kernel runs on " + threads + " threads: allocate it from Arena.ofShared(), "
                    + "Arena.ofAuto() or Arena.global(), or pass a 1-thread Parallel");
        }
    }

    /**
     * The first {@code outBytes} of {@code out} and the first {@code inBytes} of {@code in} do not overlap (an
     * output aliasing an input the kernel reads later would give silently wrong results).
     */
    public static void disjoint(String outName, MemorySegment out, long outBytes,
                                String inName, MemorySegment in, long inBytes) {
        if (outBytes == 0 || inBytes == 0) {
            return;
        }
        if (out.asSlice(0, outBytes).asOverlappingSlice(in.asSlice(0, inBytes)).isPresent()) {
            throw new IllegalArgumentException(outName + " overlaps " + inName + ": an output must not alias an input");
        }
    }

    /**
     * The first {@code bytes} of {@code out} and of {@code in} are the same memory (an element-wise kernel working in
     * place, which loads every element before it stores it) or do not overlap; a partial overlap would read elements
     * already overwritten.
     */
    public static void sameOrDisjoint(String outName, MemorySegment out, String inName, MemorySegment in, long bytes) {
        if (bytes == 0) {
            return;
        }
        MemorySegment o = out.asSlice(0, bytes);
        MemorySegment i = in.asSlice(0, bytes);
        if (o.asOverlappingSlice(i).isPresent() && o.address() != i.address()) {
            throw new IllegalArgumentException(outName + " partly overlaps " + inName + " (" + (i.address()
                    - o.address()) + " bytes apart): an output may be exactly an input (in place), no other overlap");
        }
    }
}
