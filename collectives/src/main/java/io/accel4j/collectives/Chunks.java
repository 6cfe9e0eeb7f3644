package io.accel4j.collectives;

/**
 * How {@link Communicator#reduceScatter} and {@link Communicator#allGather} split {@code count} elements over
 * {@code N} ranks, identically in every backend: chunk {@code r} is the element range
 * {@code [⌊r·count/N⌋, ⌊(r+1)·count/N⌋)}. The chunks tile {@code [0, count)} in rank order; their lengths differ by at
 * most one, the longer ones are spread out (for count = 5, N = 3: lengths 1, 2, 2) and when {@code count < N} some
 * chunks are empty (for count = 1, N = 3: only chunk 2 holds the element).
 */
public final class Chunks {

    private Chunks() {}

    /** First element of chunk {@code r}: {@code ⌊r·count/N⌋} (computed without overflow for any count ≥ 0). */
    public static long start(long count, int n, int r) {
        if (n < 1 || r < 0 || r > n || count < 0) {
            throw new IllegalArgumentException("chunk " + r + " of " + count + " elements over " + n + " ranks");
        }
        // count = q·n + m  ⇒  ⌊r·count/n⌋ = r·q + ⌊r·m/n⌋, and r·m < n² fits easily
        long q = count / n, m = count % n;
        return r * q + (r * m) / n;
    }

    /** Number of elements of chunk {@code r}. */
    public static long length(long count, int n, int r) {
        return start(count, n, r + 1) - start(count, n, r);
    }
}
