package io.accel4j.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.IntToDoubleFunction;

import org.junit.jupiter.api.Test;

import static io.accel4j.core.CastReference.BF16;
import static io.accel4j.core.CastReference.E4M3;
import static io.accel4j.core.CastReference.E5M2;
import static io.accel4j.core.CastReference.FP16;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every code of every format decoded, against the formula {@code sign·2^(e−bias)·(1+m/2^mbits)} (subnormals
 * {@code sign·m·2^(1−bias−mbits)}, infinities, NaNs) in {@link CastReference}; and every non-NaN code survives
 * decode → encode unchanged.
 */
class DecodeTest {

    @Test
    void bf16EveryCode() {
        List<String> bad = check(BF16, c -> Bf16.toFloat((short) c), DType.BF16);
        for (int c = 0; c < 1 << 16; c++) { // exact: a NaN keeps its whole payload
            int raw = Float.floatToRawIntBits(Bf16.toFloat((short) c));
            if (raw != c << 16) {
                bad.add(String.format(Locale.ROOT, "bf16 0x%04x: expected float bits 0x%08x, got 0x%08x",
                        c, c << 16, raw));
            }
        }
        assertThat(bad).as("bf16 decode").isEmpty();
    }

    @Test
    void fp16EveryCodeAndAgreesWithTheJdk() {
        List<String> bad = check(FP16, c -> Fp16.toFloat((short) c), DType.FP16);
        for (int c = 0; c < 1 << 16; c++) {
            int ours = Float.floatToRawIntBits(Fp16.toFloat((short) c));
            int jdk = Float.floatToRawIntBits(Float.float16ToFloat((short) c));
            if (ours != jdk) {
                bad.add(String.format(Locale.ROOT, "fp16 0x%04x: JDK gives 0x%08x, got 0x%08x", c, jdk, ours));
            }
        }
        assertThat(bad).as("fp16 decode").isEmpty();
    }

    @Test
    void fp8E4M3EveryCode() {
        List<String> bad = check(E4M3, c -> Fp8E4M3.toFloat((byte) c), DType.FP8_E4M3);
        checkQuietNaNs(bad, "e4m3", c -> Fp8E4M3.toFloat((byte) c));
        assertThat(bad).as("e4m3 decode").isEmpty();
        assertThat(Fp8E4M3.toFloat((byte) 0x7E)).isEqualTo(Fp8E4M3.MAX).isEqualTo(448f);
        assertThat(Fp8E4M3.toFloat((byte) 0x01)).isEqualTo(Fp8E4M3.MIN_SUBNORMAL).isEqualTo(0x1p-9f);
        assertThat(Fp8E4M3.toFloat((byte) 0x08)).isEqualTo(Fp8E4M3.MIN_NORMAL).isEqualTo(0x1p-6f);
        assertThat(Fp8E4M3.toFloat((byte) 0x78)).isEqualTo(256f); // S.1111.000 is a number in E4M3, not inf
    }

    @Test
    void fp8E5M2EveryCode() {
        List<String> bad = check(E5M2, c -> Fp8E5M2.toFloat((byte) c), DType.FP8_E5M2);
        checkQuietNaNs(bad, "e5m2", c -> Fp8E5M2.toFloat((byte) c));
        assertThat(bad).as("e5m2 decode").isEmpty();
        assertThat(Fp8E5M2.toFloat((byte) 0x7B)).isEqualTo(Fp8E5M2.MAX).isEqualTo(57344f);
        assertThat(Fp8E5M2.toFloat((byte) 0x01)).isEqualTo(Fp8E5M2.MIN_SUBNORMAL).isEqualTo(0x1p-16f);
        assertThat(Fp8E5M2.toFloat((byte) 0x04)).isEqualTo(Fp8E5M2.MIN_NORMAL).isEqualTo(0x1p-14f);
        assertThat(Fp8E5M2.toFloat(Fp8E5M2.INF)).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(Fp8E5M2.toFloat((byte) 0xFC)).isEqualTo(Float.NEGATIVE_INFINITY);
    }

    /** The reference's max is the decoded largest finite code, and DType reports it. */
    @Test
    void maxFiniteAgreesWithTheFormula() {
        assertThat((double) DType.BF16.maxFinite()).isEqualTo(BF16.decode(0x7F7F)).isEqualTo(BF16.max());
        assertThat((double) DType.FP16.maxFinite()).isEqualTo(FP16.decode(0x7BFF)).isEqualTo(FP16.max());
        assertThat((double) DType.FP8_E4M3.maxFinite()).isEqualTo(E4M3.decode(0x7E)).isEqualTo(E4M3.max());
        assertThat((double) DType.FP8_E5M2.maxFinite()).isEqualTo(E5M2.decode(0x7B)).isEqualTo(E5M2.max());
        assertThat(DType.FP32.maxFinite()).isEqualTo(Float.MAX_VALUE);
    }

    /**
     * Each code against the formula (raw double bits, so the sign of zero counts; NaN: NaN with the code's sign),
     * DType.decode/getFloat against the per-format class, and encode(decode(c)) == c for non-NaN codes.
     */
    private static List<String> check(CastReference f, IntToDoubleFunction decode, DType type) {
        List<String> bad = new ArrayList<>();
        int signBit = 1 << (f.ebits() + f.mbits());
        for (int c = 0; c < f.codeCount(); c++) {
            double expected = f.decode(c);
            double actual = decode.applyAsDouble(c);
            boolean ok = Double.isNaN(expected)
                    ? Double.isNaN(actual) && (Double.doubleToRawLongBits(actual) < 0) == ((c & signBit) != 0)
                    : Double.doubleToRawLongBits(actual) == Double.doubleToRawLongBits(expected);
            if (!ok) {
                bad.add(String.format(Locale.ROOT, "%s 0x%x: formula %s, decoded %s", f.name(), c, expected, actual));
            }
            if (Float.floatToRawIntBits(type.decode(c)) != Float.floatToRawIntBits((float) actual)
                    && !Double.isNaN(actual)) {
                bad.add(String.format(Locale.ROOT, "%s 0x%x: DType.decode %s, class %s", f.name(), c,
                        type.decode(c), actual));
            }
            if (!Double.isNaN(expected)) {
                for (boolean sat : new boolean[] {false, true}) {
                    int back = type.encode((float) expected, sat);
                    boolean satInf = sat && f != BF16 && f != FP16 && Double.isInfinite(expected);
                    if (back != c && !satInf) {
                        bad.add(String.format(Locale.ROOT, "%s 0x%x: decodes to %s, encodes back to 0x%x (saturate %s)",
                                f.name(), c, expected, back, sat));
                    }
                }
            }
        }
        return bad;
    }

    /** The fp8 NaN codes decode to the quiet NaN {@code sign|0x7FC00000}, exactly. */
    private static void checkQuietNaNs(List<String> bad, String name, IntToDoubleFunction decode) {
        for (int c = 0; c < 256; c++) {
            float v = (float) decode.applyAsDouble(c);
            int expected = (c & 0x80) << 24 | 0x7FC0_0000;
            if (Float.isNaN(v) && Float.floatToRawIntBits(v) != expected) {
                bad.add(String.format(Locale.ROOT, "%s 0x%02x: expected NaN bits 0x%08x, got 0x%08x",
                        name, c, expected, Float.floatToRawIntBits(v)));
            }
        }
    }
}
