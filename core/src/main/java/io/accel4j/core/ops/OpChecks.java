package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The argument checks every backend makes at an op's entry, written once: the per-op checkers of the contract
 * ({@link LayerNormOps#checkForward}, {@link PointwiseOps#checkGeluForward}, {@link MatmulOps#checkSizes}, …) are
 * built from these and called by the CPU kernels and the GPU launchers alike, so both say the same thing. Messages
 * name the argument and both numbers; a freed segment gives {@link IllegalStateException}, everything else
 * {@link IllegalArgumentException}.
 */
public final class OpChecks {

    private OpChecks() {}

    /** {@code value ≥ 1}. */
    public static void positive(String name, long value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + value);
        }
    }

    /** {@code value ≥ 0}. */
    public static void nonNegative(String name, long value) {
        if (value < 0) {
            throw new IllegalArgumentException(name + " must be >= 0, got " + value);
        }
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} fp32 values. Returns it. */
    public static MemorySegment floats(String name, MemorySegment seg, long n) {
        return elements(name, seg, n, Float.BYTES, "floats");
    }

    /** {@code seg} is non-null, alive, and holds at least {@code n} int32 values. Returns it. */
    public static MemorySegment ints(String name, MemorySegment seg, long n) {
        return elements(name, seg, n, Integer.BYTES, "ints");
    }

    /**
     * {@code seg} is non-null, alive, and holds at least {@code n} elements of {@code bytes} bytes each
     * ({@code what}: their name in the message, e.g. "floats"). Returns it.
     */
    public static MemorySegment elements(String name, MemorySegment seg, long n, int bytes, String what) {
        Objects.requireNonNull(seg, name);
        alive(name, seg);
        long need = Math.multiplyExact(n, (long) bytes);
        if (seg.byteSize() < need) {
            throw new IllegalArgumentException(name + " holds " + seg.byteSize() / bytes + " " + what + ", " + n
                    + " needed");
        }
        return seg;
    }

    /** The segment's memory has not been freed (a device view is never freed from Java's side). */
    public static void alive(String name, MemorySegment seg) {
        if (!seg.scope().isAlive()) {
            throw new IllegalStateException(name + "'s memory has been freed (its arena is closed)");
        }
    }
}
