package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/** Token plus position embedding. */
public interface EncoderOps {

    /**
     * {@code out[b,t,:] (B,T,C) = wte[inp[b,t], :] + wpe[t, :]}.
     *
     * @param inp tokens (B,T) int32, each in {@code [0, V)}
     * @param wte token embeddings, at least (V,C)
     * @param wpe position embeddings, at least (T,C)
     */
    void encoderForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                        int B, int T, int C, int V);

    /**
     * {@code dwte[inp[b,t], :] += dout[b,t,:]} and {@code dwpe[t, :] += dout[b,t,:]} for every (b,t). Deterministic:
     * the contributions to one row are summed in (b,t) order whatever the thread count.
     */
    void encoderBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                         int B, int T, int C, int V);

    /**
     * {@link #encoderForward}'s argument checks, shared by every backend: B, T, C, V ≥ 1; out (B·T·C) floats, inp
     * (B·T) ints, wte (V·C), wpe (T·C) floats. The tokens' range is each backend's to check where it reads them.
     */
    static void checkForward(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                             int B, int T, int C, int V) {
        long rows = checkSizes(B, T, C, V);
        OpChecks.floats("out", out, rows * C);
        OpChecks.ints("inp", inp, rows);
        OpChecks.floats("wte", wte, (long) V * C);
        OpChecks.floats("wpe", wpe, (long) T * C);
    }

    /**
     * {@link #encoderBackward}'s argument checks, shared by every backend: B, T, C, V ≥ 1; dwte (V·C), dwpe (T·C),
     * dout (B·T·C) floats, inp (B·T) ints.
     */
    static void checkBackward(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                              int B, int T, int C, int V) {
        long rows = checkSizes(B, T, C, V);
        OpChecks.floats("dwte", dwte, (long) V * C);
        OpChecks.floats("dwpe", dwpe, (long) T * C);
        OpChecks.floats("dout", dout, rows * C);
        OpChecks.ints("inp", inp, rows);
    }

    /** B, T, C, V ≥ 1; returns B·T. */
    private static long checkSizes(int B, int T, int C, int V) {
        OpChecks.positive("B", B);
        OpChecks.positive("T", T);
        OpChecks.positive("C", C);
        OpChecks.positive("V", V);
        return (long) B * T;
    }
}
