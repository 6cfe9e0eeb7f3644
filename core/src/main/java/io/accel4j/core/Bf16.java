package io.accel4j.core;

/**
 * bfloat16: 1 sign bit, 8 exponent bits (bias 127), 7 mantissa bits — the top half of an fp32 bit pattern.
 *
 * <ul>
 *   <li>{@link #toFloat} is exact (every bf16 is a float): the 16 bits become the high half of the float.</li>
 *   <li>{@link #fromFloat} rounds to nearest, ties to even, as IEEE 754 does: subnormals and signed zeros are rounded
 *       like any other value, values at or above {@code 0x1.ffp127} (max bf16 + half an ulp) and ±inf give ±inf.
 *       There is no saturating mode.</li>
 *   <li>NaN stays NaN with its sign: the top 7 payload bits are kept and the quiet bit is set, so a NaN whose payload
 *       lives only in the low 16 bits never turns into an infinity.</li>
 * </ul>
 */
public final class Bf16 {

    private Bf16() {}

    /** The bf16 nearest to {@code x} (ties to even); NaN → quiet NaN with the same sign and top payload bits. */
    public static short fromFloat(float x) {
        int bits = Float.floatToRawIntBits(x);
        if ((bits & 0x7FFF_FFFF) > 0x7F80_0000) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        // add just under half an ulp, plus one when the kept lsb is odd, then truncate: ties go to the even side
        return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
    }

    /** The float with the same value as the bf16 {@code h} (exact; NaN payloads are kept as they are). */
    public static float toFloat(short h) {
        return Float.intBitsToFloat(h << 16);
    }

    /**
     * Stochastic rounding: adds the low 16 bits of {@code randomBits} to the float's bit pattern and truncates, so
     * {@code x} rounds away from zero with probability equal to the discarded fraction of a bf16 ulp (exactly
     * {@code k/65536} where {@code k} is the discarded 16-bit field), and towards zero otherwise; the expected value of
     * the result is {@code x}. Exact bf16 values (and ±0, ±inf) are returned unchanged; NaN is handled as in
     * {@link #fromFloat}. A finite value above the largest bf16 ({@code 0x1.fep127}) rounds up to ±inf with that same
     * probability — the "next bf16 away from zero" there is infinity.
     *
     * <p>Feed it {@link CounterRng#bits(long, long)} to make the result reproducible by element index.
     */
    public static short fromFloatStochastic(float x, int randomBits) {
        int bits = Float.floatToRawIntBits(x);
        if ((bits & 0x7FFF_FFFF) > 0x7F80_0000) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        // the magnitude is <= 0x7F80_0000, so the carry never reaches the sign bit
        return (short) ((bits + (randomBits & 0xFFFF)) >>> 16);
    }
}
