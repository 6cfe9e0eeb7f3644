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
}
