package io.accel4j.core;

/**
 * OCP 8-bit floating point E4M3 ("OFP8", as in NVIDIA's {@code __nv_fp8_e4m3}): 1 sign bit, 4 exponent bits
 * (bias 7), 3 mantissa bits, no infinities.
 *
 * <ul>
 *   <li>Values: exponent field 1…15 is normal, {@code ±2^(e−7)·(1 + m/8)}; exponent 0 is subnormal,
 *       {@code ±m·2^-9}. Largest finite {@code S.1111.110} = ±448; smallest normal 2^-6; smallest subnormal 2^-9.</li>
 *   <li>NaN is {@code S.1111.111} ({@code 0x7F}, {@code 0xFF}); every other code is a number.</li>
 *   <li>{@link #fromFloat} rounds to nearest, ties to even; subnormals and signed zeros exact (|x| ≤ 2^-10 gives ±0).
 *       Overflow: a finite |x| > 464 — 464, halfway between 448 and the (missing) 480, ties to 448's even mantissa —
 *       and ±inf give ±448 when {@code saturate}, NaN ({@code 0x7F|sign}) otherwise. This is CUDA's
 *       {@code __NV_SATFINITE} / {@code __NV_NOSAT}.</li>
 *   <li>NaN input gives {@code 0x7F|sign} whatever {@code saturate} says. CUDA's conversion always gives {@code 0x7F}
 *       (it drops the sign); here the sign is kept, as for every other format in accel4j.</li>
 * </ul>
 */
public final class Fp8E4M3 {

    /** Largest finite value, code {@code 0x7E}. */
    public static final float MAX = 448f;
    /** Smallest positive normal value, code {@code 0x08}. */
    public static final float MIN_NORMAL = 0x1p-6f;
    /** Smallest positive subnormal value, code {@code 0x01}. */
    public static final float MIN_SUBNORMAL = 0x1p-9f;
    /** The NaN code with a clear sign bit; {@code 0xFF} is the other NaN. */
    public static final byte NAN = 0x7F;

    private static final int MAX_CODE = 0x7E;
    private static final int OVERFLOW_ABOVE = Float.floatToRawIntBits(464f); // |x| above this overflows
    private static final int MIN_NORMAL_BITS = Float.floatToRawIntBits(MIN_NORMAL);
    private static final int REBIAS = (127 - 7) << 23;
    /** Adding 2^14 leaves the float an ulp of 2^-9, the subnormal spacing: the FPU's own RNE rounds for us. */
    private static final float SUB_MAGIC = 0x1p14f;
    private static final int SUB_MAGIC_BITS = Float.floatToRawIntBits(SUB_MAGIC);
    private static final float[] DECODE = new float[256];

    static {
        for (int c = 0; c < 256; c++) {
            int mag = c & 0x7F;
            float v;
            if (mag == 0x7F) {
                v = Float.intBitsToFloat(0x7FC0_0000);
            } else if (mag < 8) {
                v = mag * MIN_SUBNORMAL;
            } else {
                v = Float.intBitsToFloat((mag << 20) + REBIAS);
            }
            DECODE[c] = Float.intBitsToFloat(Float.floatToRawIntBits(v) | (c & 0x80) << 24); // sign as a bit, NaN too
        }
    }

    private Fp8E4M3() {}

    /** The E4M3 code nearest to {@code x} (ties to even); see the class comment for overflow and NaN. */
    public static byte fromFloat(float x, boolean saturate) {
        int bits = Float.floatToRawIntBits(x);
        int sign = (bits >>> 24) & 0x80;
        int abs = bits & 0x7FFF_FFFF;
        int code;
        if (abs > 0x7F80_0000) {
            code = 0x7F;
        } else if (abs > OVERFLOW_ABOVE) {
            code = saturate ? MAX_CODE : 0x7F;
        } else if (abs < MIN_NORMAL_BITS) {
            code = Float.floatToRawIntBits(Float.intBitsToFloat(abs) + SUB_MAGIC) - SUB_MAGIC_BITS;
        } else {
            code = (abs - REBIAS + 0x7_FFFF + ((abs >>> 20) & 1)) >>> 20;
        }
        return (byte) (sign | code);
    }

    /** The value of code {@code b} (exact); the NaN codes give a quiet float NaN with the code's sign. */
    public static float toFloat(byte b) {
        return DECODE[b & 0xFF];
    }
}
