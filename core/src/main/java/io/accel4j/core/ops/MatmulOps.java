package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/** A linear layer, weights stored (out, in) as in PyTorch and llm.c. */
public interface MatmulOps {

    /** {@code out (N,OC) = inp (N,C) · weightᵀ (C,OC) + bias (OC)}; {@code bias} may be null. */
    void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                       int N, int C, int OC);

    /**
     * {@code dinp (N,C) += dout · weight}, {@code dweight (OC,C) += doutᵀ · inp}, {@code dbias (OC) += Σ_rows dout}
     * ({@code dbias} may be null when the layer has no bias).
     */
    void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                        MemorySegment inp, MemorySegment weight, int N, int C, int OC);
}
