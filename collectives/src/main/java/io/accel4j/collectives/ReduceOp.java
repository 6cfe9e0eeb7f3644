package io.accel4j.collectives;

/**
 * How {@link Communicator#allReduce} and {@link Communicator#reduceScatter} combine the ranks' values, element by
 * element, in fp32 (bf16 inputs are widened exactly to fp32 first and the result is rounded to bf16 once, at the end,
 * to nearest even).
 */
public enum ReduceOp {
    /** {@code Σ_r x_r}. */
    SUM,
    /** {@code (Σ_r x_r) / N}: the fp32 sum, then one fp32 division by the number of ranks. */
    AVG,
    /** {@code max_r x_r}, as {@link Math#max(float, float)} (a NaN anywhere gives NaN; {@code −0 < +0}). */
    MAX
}
