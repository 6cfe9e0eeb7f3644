package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/** Whole-buffer reductions for clipping, loss scaling and FP8 scaling. */
public interface ReductionOps {

    /**
     * {@code Σ x[i]²} over n fp32 values, accumulated in float64; the global gradient norm is the square root of the
     * sum of this over every gradient buffer. NaN or inf in x give a non-finite result.
     */
    double sumOfSquares(MemorySegment x, long n);

    /** Whether any of the n fp32 values is NaN or ±inf (an overflow that makes a loss-scaled step be skipped). */
    boolean hasNonFinite(MemorySegment x, long n);

    /** {@code max |x[i]|} over n fp32 values (0 when n is 0); NaN when any value is NaN. */
    float amax(MemorySegment x, long n);

    /** The checks every backend makes for each reduction: {@code n ≥ 0} and x holding n floats. */
    static void checkReduction(MemorySegment x, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.floats("x", x, n);
    }
}
