package io.accel4j.core;

import org.junit.jupiter.api.Test;

import static io.accel4j.core.CastReference.BF16;
import static io.accel4j.core.CastReference.E4M3;
import static io.accel4j.core.CastReference.E5M2;
import static io.accel4j.core.CastReference.FP16;
import static io.accel4j.core.Exhaustive.code;

/**
 * Every one of the 2^32 float bit patterns through every rounding cast, against {@link CastReference}: the result's
 * code, decoded by the reference formula, must be the reference's nearest grid value with the input's sign (signed
 * zeros included), or the format's overflow result; NaN inputs must give the specified NaN.
 *
 * <p>Values are compared as raw double bits, so {@code -0.0 ≠ +0.0}.
 */
class ExhaustiveCastTest {

    @Test
    void bf16RoundToNearestEven() {
        double[] ref = BF16.decodeTable();
        Exhaustive.allFloats("bf16 RNE", (from, count, failures) -> {
            for (int i = 0; i < count; i++) {
                int p = from + i;
                float x = Float.intBitsToFloat(p);
                boolean nan = Float.isNaN(x);
                double q = nan ? 0 : BF16.roundAbs(x);
                double magnitude = q > BF16.max() ? Double.POSITIVE_INFINITY : q;
                for (int s = 0; s <= 1; s++) {
                    int bits = p | s << 31;
                    int code = Bf16.fromFloat(Float.intBitsToFloat(bits)) & 0xFFFF;
                    if (nan) {
                        // NaN, same sign, the float's top 6 payload bits kept below a set quiet bit
                        boolean ok = Double.isNaN(ref[code]) && code >>> 15 == s
                                && (code & 0x40) != 0 && (code & 0x3F) == ((p >>> 16) & 0x3F);
                        if (!ok) {
                            failures.add("bf16", bits, String.format("quiet NaN 0x%04x", (bits >>> 16) | 0x40),
                                    code(code, 4, ref[code]));
                        }
                    } else {
                        double expected = Math.copySign(magnitude, s == 1 ? -1.0 : 1.0);
                        if (Double.doubleToRawLongBits(ref[code]) != Double.doubleToRawLongBits(expected)) {
                            failures.add("bf16", bits, String.valueOf(expected), code(code, 4, ref[code]));
                        }
                    }
                }
            }
        });
    }

    @Test
    void fp16RoundToNearestEvenAndAgreesWithTheJdk() {
        double[] ref = FP16.decodeTable();
        Exhaustive.allFloats("fp16 RNE", (from, count, failures) -> {
            for (int i = 0; i < count; i++) {
                int p = from + i;
                float x = Float.intBitsToFloat(p);
                boolean nan = Float.isNaN(x);
                double q = nan ? 0 : FP16.roundAbs(x);
                double magnitude = q > FP16.max() ? Double.POSITIVE_INFINITY : q;
                for (int s = 0; s <= 1; s++) {
                    int bits = p | s << 31;
                    float xs = Float.intBitsToFloat(bits);
                    int code = Fp16.fromFloat(xs) & 0xFFFF;
                    int jdk = Float.floatToFloat16(xs) & 0xFFFF;
                    if (code != jdk) {
                        failures.add("fp16 vs JDK", bits, code(jdk, 4, ref[jdk]), code(code, 4, ref[code]));
                    } else if (nan) {
                        if (!Double.isNaN(ref[code]) || code >>> 15 != s) {
                            failures.add("fp16", bits, "NaN with the input's sign", code(code, 4, ref[code]));
                        }
                    } else {
                        double expected = Math.copySign(magnitude, s == 1 ? -1.0 : 1.0);
                        if (Double.doubleToRawLongBits(ref[code]) != Double.doubleToRawLongBits(expected)) {
                            failures.add("fp16", bits, String.valueOf(expected), code(code, 4, ref[code]));
                        }
                    }
                }
            }
        });
    }

    /** E4M3: overflow (rounded |x| above 448, i.e. |x| > 464, and ±inf) is ±448 saturated, NaN otherwise. */
    @Test
    void fp8E4M3SaturatingAndNot() {
        double[] ref = E4M3.decodeTable();
        Exhaustive.allFloats("fp8 e4m3 (saturate and not)", (from, count, failures) -> {
            for (int i = 0; i < count; i++) {
                int p = from + i;
                float x = Float.intBitsToFloat(p);
                boolean nan = Float.isNaN(x);
                double q = nan ? 0 : E4M3.roundAbs(x);
                boolean overflow = q > E4M3.max();
                for (int s = 0; s <= 1; s++) {
                    int bits = p | s << 31;
                    float xs = Float.intBitsToFloat(bits);
                    double signedQ = Math.copySign(q, s == 1 ? -1.0 : 1.0);
                    for (int sat = 0; sat <= 1; sat++) {
                        int code = Fp8E4M3.fromFloat(xs, sat == 1) & 0xFF;
                        if (nan || overflow) {
                            int expected = (nan || sat == 0 ? 0x7F : 0x7E) | s << 7; // S.1111.111 NaN, S.1111.110 max
                            if (code != expected) {
                                failures.add(sat == 1 ? "e4m3 saturate" : "e4m3", bits,
                                        code(expected, 2, ref[expected]), code(code, 2, ref[code]));
                            }
                        } else if (Double.doubleToRawLongBits(ref[code]) != Double.doubleToRawLongBits(signedQ)) {
                            failures.add(sat == 1 ? "e4m3 saturate" : "e4m3", bits, String.valueOf(signedQ),
                                    code(code, 2, ref[code]));
                        }
                    }
                }
            }
        });
    }

    /** E5M2: overflow (rounded |x| above 57344, i.e. |x| ≥ 61440, and ±inf) is ±57344 saturated, ±inf otherwise. */
    @Test
    void fp8E5M2SaturatingAndNot() {
        double[] ref = E5M2.decodeTable();
        Exhaustive.allFloats("fp8 e5m2 (saturate and not)", (from, count, failures) -> {
            for (int i = 0; i < count; i++) {
                int p = from + i;
                float x = Float.intBitsToFloat(p);
                boolean nan = Float.isNaN(x);
                double q = nan ? 0 : E5M2.roundAbs(x);
                boolean overflow = q > E5M2.max();
                for (int s = 0; s <= 1; s++) {
                    int bits = p | s << 31;
                    float xs = Float.intBitsToFloat(bits);
                    double sign = s == 1 ? -1.0 : 1.0;
                    for (int sat = 0; sat <= 1; sat++) {
                        int code = Fp8E5M2.fromFloat(xs, sat == 1) & 0xFF;
                        if (nan) {
                            int expected = 0x7F | s << 7;
                            if (code != expected) {
                                failures.add(sat == 1 ? "e5m2 saturate" : "e5m2", bits,
                                        code(expected, 2, ref[expected]), code(code, 2, ref[code]));
                            }
                        } else {
                            double magnitude = !overflow ? q : sat == 1 ? E5M2.max() : Double.POSITIVE_INFINITY;
                            double expected = Math.copySign(magnitude, sign);
                            if (Double.doubleToRawLongBits(ref[code]) != Double.doubleToRawLongBits(expected)) {
                                failures.add(sat == 1 ? "e5m2 saturate" : "e5m2", bits, String.valueOf(expected),
                                        code(code, 2, ref[code]));
                            }
                        }
                    }
                }
            }
        });
    }
}
