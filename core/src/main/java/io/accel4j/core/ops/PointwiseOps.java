package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/** Element-wise ops over flat buffers of n floats: GELU and the residual add. */
public interface PointwiseOps {

    /** {@code out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))}, the tanh approximation of GELU. */
    void geluForward(MemorySegment out, MemorySegment inp, long n);

    /** {@code dinp += gelu'(inp)·dout}. */
    void geluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n);

    /** {@code out = inp1 + inp2}; {@code out} may be {@code inp1} or {@code inp2} (in place: {@code x += y}). */
    void residualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n);

    /** {@code dinp1 += dout}, {@code dinp2 += dout}. */
    void residualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n);

    /** {@link #geluForward}'s argument checks, shared by every backend: n ≥ 0; out, inp n floats each. */
    static void checkGeluForward(MemorySegment out, MemorySegment inp, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.floats("out", out, n);
        OpChecks.floats("inp", inp, n);
    }

    /** {@link #geluBackward}'s argument checks, shared by every backend: n ≥ 0; dinp, inp, dout n floats each. */
    static void checkGeluBackward(MemorySegment dinp, MemorySegment inp, MemorySegment dout, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.floats("dinp", dinp, n);
        OpChecks.floats("inp", inp, n);
        OpChecks.floats("dout", dout, n);
    }

    /** {@link #residualForward}'s argument checks, shared by every backend: n ≥ 0; out, inp1, inp2 n floats each. */
    static void checkResidualForward(MemorySegment out, MemorySegment inp1, MemorySegment inp2, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.floats("out", out, n);
        OpChecks.floats("inp1", inp1, n);
        OpChecks.floats("inp2", inp2, n);
    }

    /** {@link #residualBackward}'s argument checks, shared by every backend: n ≥ 0; dinp1, dinp2, dout n floats. */
    static void checkResidualBackward(MemorySegment dinp1, MemorySegment dinp2, MemorySegment dout, long n) {
        OpChecks.nonNegative("n", n);
        OpChecks.floats("dinp1", dinp1, n);
        OpChecks.floats("dinp2", dinp2, n);
        OpChecks.floats("dout", dout, n);
    }
}
