package io.accel4j.core;

/**
 * IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits; max ±65504, min subnormal 2^-24.
 *
 * <p>Both directions are the JDK's {@link Float#floatToFloat16} and {@link Float#float16ToFloat}: round to nearest,
 * ties to even; subnormals and signed zeros exact; {@code |x| >= 65520} (max + half an ulp) and ±inf give ±inf, there
 * is no saturating mode. NaN stays NaN with its sign. Which payload bits a NaN keeps is the JDK's business and differs
 * between platforms: on x86 with F16C the (intrinsified) conversions quiet the NaN, the portable Java code keeps the
 * payload's top bits and folds the rest in. Code that must agree bit for bit with this class on NaNs delegates to it.
 */
public final class Fp16 {

    /** Largest finite binary16 value. */
    public static final float MAX = 65504f;

    private Fp16() {}

    /** The binary16 nearest to {@code x} (ties to even); the bits of {@link Float#floatToFloat16}. */
    public static short fromFloat(float x) {
        return Float.floatToFloat16(x);
    }

    /** The float with the same value as the binary16 {@code h} (exact); {@link Float#float16ToFloat}. */
    public static float toFloat(short h) {
        return Float.float16ToFloat(h);
    }
}
