package io.accel4j.core.ops;

import java.lang.foreign.MemorySegment;

/** Layer normalisation over the last dimension, ε = {@value #EPS}. */
public interface LayerNormOps {

    /** The ε added to the variance. */
    float EPS = 1e-5f;

    /**
     * For each of the N rows: {@code mean = Σx/C}, {@code rstd = 1/√(Σ(x−mean)²/C + ε)},
     * {@code out (N,C) = (x − mean)·rstd·weight + bias}. Writes {@code out}, {@code mean (N)} and {@code rstd (N)}
     * (saved for backward).
     */
    void layernormForward(MemorySegment out, MemorySegment mean, MemorySegment rstd,
                          MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C);

    /**
     * With {@code x̂ = (x − mean)·rstd} and {@code g = dout·weight}:
     * {@code dinp (N,C) += rstd·(g − mean_C(g) − x̂·mean_C(g·x̂))}, {@code dweight (C) += Σ_rows dout·x̂},
     * {@code dbias (C) += Σ_rows dout}.
     */
    void layernormBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                           MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                           int N, int C);

    /**
     * {@link #layernormForward}'s argument checks, shared by every backend: N, C ≥ 1; out (N·C), mean, rstd (N),
     * inp (N·C), weight, bias (C) floats each.
     */
    static void checkForward(MemorySegment out, MemorySegment mean, MemorySegment rstd, MemorySegment inp,
                             MemorySegment weight, MemorySegment bias, int N, int C) {
        OpChecks.positive("N", N);
        OpChecks.positive("C", C);
        long nc = (long) N * C;
        OpChecks.floats("out", out, nc); OpChecks.floats("mean", mean, N); OpChecks.floats("rstd", rstd, N);
        OpChecks.floats("inp", inp, nc); OpChecks.floats("weight", weight, C); OpChecks.floats("bias", bias, C);
    }

    /**
     * {@link #layernormBackward}'s argument checks, shared by every backend: N, C ≥ 1; dinp (N·C), dweight,
     * dbias (C), dout, inp (N·C), weight (C), mean, rstd (N) floats each.
     */
    static void checkBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                              MemorySegment inp, MemorySegment weight, MemorySegment mean, MemorySegment rstd,
                              int N, int C) {
        OpChecks.positive("N", N);
        OpChecks.positive("C", C);
        long nc = (long) N * C;
        OpChecks.floats("dinp", dinp, nc); OpChecks.floats("dweight", dweight, C);
        OpChecks.floats("dbias", dbias, C); OpChecks.floats("dout", dout, nc); OpChecks.floats("inp", inp, nc);
        OpChecks.floats("weight", weight, C); OpChecks.floats("mean", mean, N); OpChecks.floats("rstd", rstd, N);
    }
}
