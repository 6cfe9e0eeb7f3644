package io.accel4j.core;

/**
 * OCP 8-bit floating point E5M2 ("OFP8", as in NVIDIA's {@code __nv_fp8_e5m2}): 1 sign bit, 5 exponent bits
 * (bias 15), 2 mantissa bits — IEEE-like, the top byte of a binary16.
 *
 * <ul>
 *   <li>Values: exponent field 1…30 is normal, {@code ±2^(e−15)·(1 + m/4)}; exponent 0 is subnormal,
 *       {@code ±m·2^-16}. Largest finite {@code S.11110.11} = ±57344; smallest normal 2^-14; smallest subnormal
 *       2^-16.</li>
 *   <li>Exponent 31: {@code S.11111.00} is ±inf, {@code S.11111.xx} (xx ≠ 00) is NaN.</li>
 *   <li>{@link #fromFloat} rounds to nearest, ties to even; subnormals and signed zeros exact (|x| ≤ 2^-17 gives ±0).
 *       Overflow: a finite |x| ≥ 61440 — 61440 is halfway between 57344 and 65536 and ties away from 57344's odd
 *       mantissa — and ±inf give ±57344 when {@code saturate}, ±inf otherwise. This is CUDA's
 *       {@code __NV_SATFINITE} / {@code __NV_NOSAT}.</li>
 *   <li>NaN input gives {@code 0x7F|sign} whatever {@code saturate} says (the payload is not kept). CUDA's
 *       conversion gives {@code 0x7F} for every NaN (it drops the sign); here the sign is kept.</li>
 *   <li>{@link #toFloat}: every NaN code decodes to the quiet float NaN {@code sign|0x7FC00000}.</li>
 * </ul>
 */
public final class Fp8E5M2 {

    /** Largest finite value, code {@code 0x7B}. */
    public static final float MAX = 57344f;
    /** Smallest positive normal value, code {@code 0x04}. */
    public static final float MIN_NORMAL = 0x1p-14f;
    /** Smallest positive subnormal value, code {@code 0x01}. */
    public static final float MIN_SUBNORMAL = 0x1p-16f;
    /** The NaN code this class writes for a NaN with a clear sign bit. */
    public static final byte NAN = 0x7F;
    /** Positive infinity, code {@code 0x7C}. */
    public static final byte INF = 0x7C;

    private static final int MAX_CODE = 0x7B;
    private static final int OVERFLOW_FROM = Float.floatToRawIntBits(61440f); // |x| from this on overflows
    private static final int MIN_NORMAL_BITS = Float.floatToRawIntBits(MIN_NORMAL);
    private static final int REBIAS = (127 - 15) << 23;
    /** Adding 2^7 leaves the float an ulp of 2^-16, the subnormal spacing: the FPU's own RNE rounds for us. */
    private static final float SUB_MAGIC = 0x1p7f;
    private static final int SUB_MAGIC_BITS = Float.floatToRawIntBits(SUB_MAGIC);
    private static final float[] DECODE = new float[256];

    static {
        for (int c = 0; c < 256; c++) {
            int mag = c & 0x7F;
            float v;
            if (mag > 0x7C) {
                v = Float.intBitsToFloat(0x7FC0_0000);
            } else if (mag == 0x7C) {
                v = Float.POSITIVE_INFINITY;
            } else if (mag < 4) {
                v = mag * MIN_SUBNORMAL;
            } else {
                v = Float.intBitsToFloat((mag << 21) + REBIAS);
            }
            DECODE[c] = Float.intBitsToFloat(Float.floatToRawIntBits(v) | (c & 0x80) << 24); // sign as a bit, NaN too
        }
    }

    private Fp8E5M2() {}

    /** The E5M2 code nearest to {@code x} (ties to even); see the class comment for overflow and NaN. */
    public static byte fromFloat(float x, boolean saturate) {
        int bits = Float.floatToRawIntBits(x);
        int sign = (bits >>> 24) & 0x80;
        int abs = bits & 0x7FFF_FFFF;
        int code;
        if (abs > 0x7F80_0000) {
            code = 0x7F;
        } else if (abs >= OVERFLOW_FROM) {
            code = saturate ? MAX_CODE : 0x7C;
        } else if (abs < MIN_NORMAL_BITS) {
            code = Float.floatToRawIntBits(Float.intBitsToFloat(abs) + SUB_MAGIC) - SUB_MAGIC_BITS;
        } else {
            code = (abs - REBIAS + 0xF_FFFF + ((abs >>> 21) & 1)) >>> 21;
        }
        return (byte) (sign | code);
    }

    /** The value of code {@code b} (exact); the NaN codes give a quiet float NaN with the code's sign. */
    public static float toFloat(byte b) {
        return DECODE[b & 0xFF];
    }
}
