package io.accel4j.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** DType's segment access and its delegation to the per-format classes, plus the documented edge cases by example. */
class DTypeTest {

    private static final long SEED = 0xD7_0001L;

    @Test
    void byteSizes() {
        assertThat(DType.FP32.byteSize()).isEqualTo(4);
        assertThat(DType.BF16.byteSize()).isEqualTo(2);
        assertThat(DType.FP16.byteSize()).isEqualTo(2);
        assertThat(DType.FP8_E4M3.byteSize()).isEqualTo(1);
        assertThat(DType.FP8_E5M2.byteSize()).isEqualTo(1);
    }

    /** setFloat then getFloat at an odd byte offset gives decode(encode(v)), for every type, both saturate modes. */
    @Test
    void setAndGetUnalignedAgreeWithEncodeDecode() {
        Random rnd = new Random(SEED);
        int n = 257;
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (float) (rnd.nextGaussian() * Math.scalb(1.0, rnd.nextInt(-20, 20)));
        }
        values[0] = -0f;
        values[1] = Float.NaN;
        values[2] = 1e9f;
        values[3] = Float.NEGATIVE_INFINITY;
        try (Arena arena = Arena.ofConfined()) {
            for (DType t : DType.values()) {
                for (boolean sat : new boolean[] {false, true}) {
                    MemorySegment seg = arena.allocate(1 + (long) n * t.byteSize()).asSlice(1);
                    for (int i = 0; i < n; i++) {
                        t.setFloat(seg, i, values[i], sat);
                    }
                    for (int i = 0; i < n; i++) {
                        float expected = t.decode(t.encode(values[i], sat));
                        assertThat(Float.floatToRawIntBits(t.getFloat(seg, i)))
                                .as("%s saturate=%s element %d = %s", t, sat, i, values[i])
                                .isEqualTo(Float.floatToRawIntBits(expected));
                    }
                }
            }
        }
    }

    @Test
    void littleEndianLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(8);
            DType.BF16.setFloat(seg, 0, 1f, false); // 0x3F80
            assertThat(seg.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 0x80);
            assertThat(seg.get(ValueLayout.JAVA_BYTE, 1)).isEqualTo((byte) 0x3F);
            DType.FP16.setFloat(seg, 1, -2f, false); // 0xC000
            assertThat(seg.get(ValueLayout.JAVA_BYTE, 2)).isEqualTo((byte) 0x00);
            assertThat(seg.get(ValueLayout.JAVA_BYTE, 3)).isEqualTo((byte) 0xC0);
            DType.FP8_E4M3.setFloat(seg, 5, 1f, false); // 0x38
            assertThat(seg.get(ValueLayout.JAVA_BYTE, 5)).isEqualTo((byte) 0x38);
        }
    }

    @Test
    void encodeIsZeroExtendedAndDecodeIgnoresHighBits() {
        assertThat(DType.BF16.encode(-1f, false)).isEqualTo(0xBF80);
        assertThat(DType.FP16.encode(-1f, false)).isEqualTo(0xBC00);
        assertThat(DType.FP8_E4M3.encode(-1f, false)).isEqualTo(0xB8);
        assertThat(DType.FP8_E5M2.encode(-1f, false)).isEqualTo(0xBC);
        assertThat(DType.FP32.encode(-1f, false)).isEqualTo(0xBF80_0000);
        assertThat(DType.FP8_E4M3.decode(0xFFFF_FF38)).isEqualTo(1f);
        assertThat(DType.FP8_E5M2.decode(0x1234_563C)).isEqualTo(1f);
        assertThat(DType.BF16.decode(0xABCD_3F80)).isEqualTo(1f);
        assertThat(DType.FP16.decode(0xABCD_3C00)).isEqualTo(1f);
    }

    /** The thresholds of the class comments, by example. */
    @Test
    void documentedEdgeCases() {
        // E4M3: 464 ties to 448 (even mantissa 110); just above overflows
        assertThat(Fp8E4M3.fromFloat(464f, false)).isEqualTo((byte) 0x7E);
        assertThat(Fp8E4M3.fromFloat(Math.nextUp(464f), false)).isEqualTo((byte) 0x7F);
        assertThat(Fp8E4M3.fromFloat(Math.nextUp(464f), true)).isEqualTo((byte) 0x7E);
        assertThat(Fp8E4M3.fromFloat(-1e30f, true)).isEqualTo((byte) 0xFE);
        assertThat(Fp8E4M3.fromFloat(Float.NEGATIVE_INFINITY, true)).isEqualTo((byte) 0xFE);
        assertThat(Fp8E4M3.fromFloat(Float.NEGATIVE_INFINITY, false)).isEqualTo((byte) 0xFF);
        assertThat(Fp8E4M3.fromFloat(Float.intBitsToFloat(0xFFC0_0000), true)).isEqualTo((byte) 0xFF);
        assertThat(Fp8E4M3.fromFloat(0x1p-10f, false)).isEqualTo((byte) 0x00); // half the min subnormal ties to 0
        assertThat(Fp8E4M3.fromFloat(Math.nextUp(0x1p-10f), false)).isEqualTo((byte) 0x01);
        assertThat(Fp8E4M3.fromFloat(-0x1p-11f, false)).isEqualTo((byte) 0x80); // -0
        assertThat(Fp8E4M3.fromFloat(3 * 0x1p-10f, false)).isEqualTo((byte) 0x02); // 1.5 subnormal ulps → 2 (even)
        // E5M2: 61440 ties away from the odd 57344 → overflow; just below stays 57344
        assertThat(Fp8E5M2.fromFloat(61440f, false)).isEqualTo((byte) 0x7C);
        assertThat(Fp8E5M2.fromFloat(61440f, true)).isEqualTo((byte) 0x7B);
        assertThat(Fp8E5M2.fromFloat(Math.nextDown(61440f), false)).isEqualTo((byte) 0x7B);
        assertThat(Fp8E5M2.fromFloat(Float.NEGATIVE_INFINITY, false)).isEqualTo((byte) 0xFC);
        assertThat(Fp8E5M2.fromFloat(Float.NEGATIVE_INFINITY, true)).isEqualTo((byte) 0xFB);
        assertThat(Fp8E5M2.fromFloat(Float.intBitsToFloat(0xFF80_0001), false)).isEqualTo((byte) 0xFF);
        assertThat(Fp8E5M2.fromFloat(0x1p-17f, false)).isEqualTo((byte) 0x00);
        // BF16: a NaN with only low payload bits stays NaN, quiet, sign kept
        assertThat(Bf16.fromFloat(Float.intBitsToFloat(0x7F80_0001))).isEqualTo((short) 0x7FC0);
        assertThat(Bf16.fromFloat(Float.intBitsToFloat(0xFF80_0001))).isEqualTo((short) 0xFFC0);
        assertThat(Bf16.fromFloat(Float.intBitsToFloat(0x7FA1_0000))).isEqualTo((short) 0x7FE1);
        assertThat(Bf16.fromFloat(Float.MAX_VALUE)).isEqualTo((short) 0x7F80); // RNE overflows to inf
        assertThat(Bf16.fromFloat(1.00390625f)).isEqualTo((short) 0x3F80);     // tie to even (down)
        assertThat(Bf16.fromFloat(1.01171875f)).isEqualTo((short) 0x3F82);     // tie to even (up)
    }
}
