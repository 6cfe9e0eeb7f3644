package io.accel4j.cpu;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.DType;
import io.accel4j.core.Fp16;
import io.accel4j.core.Fp8E4M3;
import io.accel4j.core.Fp8E5M2;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The bulk casts against the scalar casts of {@code core}, element by element and bit for bit: random and edge inputs,
 * lengths that leave every kind of tail, non-zero offsets. The output is poisoned twice (two different byte patterns,
 * two runs), so an element the cast forgets to write cannot match both times; elements around the range must stay
 * poisoned.
 */
class CastsTest {

    private static final long SEED = 0xCA57_5EEDL;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;
    private static final byte[] POISONS = {(byte) 0x5A, (byte) 0xA5};
    /** Elements checked on each side of the range, which must keep the poison. */
    private static final int GUARD = 3;

    /** Float inputs at every format's edges. */
    private static final float[] EDGES = edges();

    private static float[] edges() {
        List<Float> e = new ArrayList<>(List.of(0f, -0f, Float.MIN_VALUE, -Float.MIN_VALUE, Float.MIN_NORMAL,
                Float.MAX_VALUE, -Float.MAX_VALUE, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY,
                0x1.fep127f, 0x1.ffp127f, Math.nextDown(0x1.ffp127f), 0x1p-133f, 0x1p-134f, 0x1.8p-133f,
                65504f, 65520f, Math.nextDown(65520f), 65536f, 0x1p-24f, 0x1p-25f, Math.nextUp(0x1p-25f), 0x1.8p-24f,
                0x1p-14f, Math.nextDown(0x1p-14f),
                448f, 464f, Math.nextUp(464f), Math.nextDown(464f), 480f, 0x1p-9f, 0x1p-10f, Math.nextUp(0x1p-10f),
                0x1.8p-9f, 0x1p-6f, Math.nextDown(0x1p-6f), 7.5f * 0x1p-9f,
                57344f, 61440f, Math.nextDown(61440f), Math.nextUp(61440f), 0x1p-16f, 0x1p-17f, 0x1.8p-16f,
                Math.nextUp(0x1p-17f), 3.5f * 0x1p-16f,
                1f + 0x1p-8f, 1f + 0x3p-8f, 1f + 0x1p-11f, 1f + 0x3p-11f, 1f + 0x1p-4f, 1f + 0x3p-4f, 1f + 0x1p-3f,
                1f + 0x3p-3f, 1f, -1f, 3.1415927f));
        for (int bits : new int[] {0x7F80_0001, 0xFF80_0001, 0x7FC0_0000, 0xFFC0_0000, 0x7FFF_FFFF, 0x7FA0_0000,
                0x7F80_1000, 0xFFBF_FFFF, 0x7F80_2000}) {
            e.add(Float.intBitsToFloat(bits));
        }
        int n = e.size();
        float[] out = new float[2 * n];
        for (int i = 0; i < n; i++) {
            out[i] = e.get(i);
            out[n + i] = -e.get(i);
        }
        return out;
    }

    /**
     * 16-bit codes at the fp16 and bf16 edges (zeros, subnormals, min normal, max, inf), the NaNs last so that the
     * first vector steps have none.
     */
    private static final int[] EDGE_CODES16 = {
        0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x3C00, 0xBC00,
        0x0080, 0x8080, 0x007F, 0x807F, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x3F80, 0xBF80, 0x0200, 0x8200, 0x3555, 0x1234,
        0x7C01, 0xFC01, 0x7E00, 0xFE00, 0x7FFF, 0xFFFF, 0x7D00, 0x7F81, 0x7FC0, 0xFFC1
    };
    /** fp8 codes at the edges of both formats, NaNs last. */
    private static final int[] EDGE_CODES8 = {
        0x00, 0x80, 0x01, 0x81, 0x03, 0x83, 0x04, 0x84, 0x07, 0x87, 0x08, 0x88, 0x7B, 0xFB, 0x7C, 0xFC, 0x7E, 0xFE,
        0x78, 0xF8, 0x38, 0xB8, 0x3C, 0xBC, 0x02, 0x06, 0x7D, 0xFD, 0x7F, 0xFF
    };

    /** One bulk cast and the scalar cast it must agree with. */
    interface Bulk {
        /** Runs the bulk cast; returns the amax for fp8 encodes, 0 otherwise. */
        float run(MemorySegment dst, long dstIndex, MemorySegment src, long srcIndex, long n);
    }

    interface Scalar {
        /** The expected raw bits of output element i given the input element's raw bits (zero-extended). */
        int expect(int srcBits, long i);
    }

    record Cast(String name, int srcBytes, int dstBytes, Bulk bulk, Scalar scalar) {
        @Override
        public String toString() {
            return name;
        }
    }

    static final long STOCHASTIC_SEED = 0x1234_5678L, INDEX0 = 1L << 40;
    static final float SCALE = 0.37f, SCALE_INV = 1 / SCALE;

    static List<Cast> casts() {
        List<Cast> c = new ArrayList<>();
        c.add(new Cast("f32->bf16", 4, 2, (d, di, s, si, n) -> { Casts.f32ToBf16(d, di, s, si, n); return 0; },
                (x, i) -> Bf16.fromFloat(Float.intBitsToFloat(x)) & 0xFFFF));
        c.add(new Cast("f32->bf16 stochastic", 4, 2, (d, di, s, si, n) -> {
            Casts.f32ToBf16Stochastic(d, di, s, si, n, STOCHASTIC_SEED, INDEX0);
            return 0;
        }, (x, i) -> Bf16.fromFloatStochastic(Float.intBitsToFloat(x), CounterRng.bits(STOCHASTIC_SEED, INDEX0 + i))
                & 0xFFFF));
        c.add(new Cast("bf16->f32", 2, 4, (d, di, s, si, n) -> { Casts.bf16ToF32(d, di, s, si, n); return 0; },
                (h, i) -> Float.floatToRawIntBits(Bf16.toFloat((short) h))));
        c.add(new Cast("f32->f16", 4, 2, (d, di, s, si, n) -> { Casts.f32ToF16(d, di, s, si, n); return 0; },
                (x, i) -> Fp16.fromFloat(Float.intBitsToFloat(x)) & 0xFFFF));
        c.add(new Cast("f16->f32", 2, 4, (d, di, s, si, n) -> { Casts.f16ToF32(d, di, s, si, n); return 0; },
                (h, i) -> Float.floatToRawIntBits(Fp16.toFloat((short) h))));
        for (boolean sat : new boolean[] {false, true}) {
            for (float scale : new float[] {1f, SCALE}) {
                String how = (sat ? " saturate" : "") + (scale != 1f ? " scale " + scale : "");
                c.add(new Cast("f32->e4m3" + how, 4, 1,
                        (d, di, s, si, n) -> Casts.f32ToFp8(DType.FP8_E4M3, d, di, s, si, n, scale, sat),
                        (x, i) -> Fp8E4M3.fromFloat(Float.intBitsToFloat(x) * scale, sat) & 0xFF));
                c.add(new Cast("f32->e5m2" + how, 4, 1,
                        (d, di, s, si, n) -> Casts.f32ToFp8(DType.FP8_E5M2, d, di, s, si, n, scale, sat),
                        (x, i) -> Fp8E5M2.fromFloat(Float.intBitsToFloat(x) * scale, sat) & 0xFF));
            }
        }
        for (float inv : new float[] {1f, SCALE_INV}) {
            String how = inv != 1f ? " scaleInv " + inv : "";
            c.add(new Cast("e4m3->f32" + how, 1, 4, (d, di, s, si, n) -> {
                Casts.fp8ToF32(DType.FP8_E4M3, d, di, s, si, n, inv);
                return 0;
            }, (b, i) -> Float.floatToRawIntBits(Fp8E4M3.toFloat((byte) b) * inv)));
            c.add(new Cast("e5m2->f32" + how, 1, 4, (d, di, s, si, n) -> {
                Casts.fp8ToF32(DType.FP8_E5M2, d, di, s, si, n, inv);
                return 0;
            }, (b, i) -> Float.floatToRawIntBits(Fp8E5M2.toFloat((byte) b) * inv)));
        }
        return c;
    }

    static Stream<Arguments> castsLengthsOffsets() {
        int lanes = Simd.lanes();
        long[] lengths = {0, 1, 7, 4L * lanes - 1, 4L * lanes, 4L * lanes + 1, 1000, 1_000_003};
        long[][] offsets = {{0, 0}, {3, 5}};
        List<Arguments> args = new ArrayList<>();
        for (Cast c : casts()) {
            for (long n : lengths) {
                for (long[] o : offsets) {
                    args.add(Arguments.of(c, n, o[0], o[1]));
                }
            }
        }
        return args.stream();
    }

    @ParameterizedTest(name = "{0} n={1} srcIndex={2} dstIndex={3}")
    @MethodSource("castsLengthsOffsets")
    void bulkAgreesWithScalarElementByElement(Cast cast, long n, long srcIndex, long dstIndex) {
        long seed = SEED ^ n ^ cast.name().hashCode();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate((srcIndex + n + GUARD) * cast.srcBytes());
            fillInput(src, cast.srcBytes(), srcIndex, n, new SplittableRandom(seed));
            MemorySegment dst = arena.allocate((dstIndex + n + GUARD) * cast.dstBytes());
            float expectedAmax = 0f;
            for (long i = 0; i < n && cast.srcBytes() == 4; i++) { // amax by a plain loop
                float x = src.get(F32, (srcIndex + i) * 4);
                if (!Float.isNaN(x)) {
                    expectedAmax = Math.max(expectedAmax, Math.abs(x));
                }
            }
            for (byte poison : POISONS) {
                dst.fill(poison);
                float amax = cast.bulk().run(dst, dstIndex, src, srcIndex, n);
                List<String> bad = new ArrayList<>();
                for (long i = -Math.min(GUARD, dstIndex); i < n + GUARD; i++) {
                    int actual = read(dst, cast.dstBytes(), dstIndex + i);
                    boolean inside = i >= 0 && i < n;
                    int in = inside ? read(src, cast.srcBytes(), srcIndex + i) : 0;
                    int expected = inside ? cast.scalar().expect(in, i) : poisonBits(poison, cast.dstBytes());
                    if (actual != expected && bad.size() < 10) {
                        bad.add(String.format(Locale.ROOT, "element %d: input 0x%x, expected 0x%x, got 0x%x%s",
                                i, in, expected, actual, inside ? "" : " (outside the range: must stay poisoned)"));
                    }
                }
                assertThat(bad).as("%s n=%d srcIndex=%d dstIndex=%d poison 0x%02x seed %d (%s)", cast, n, srcIndex,
                        dstIndex, poison, seed, Simd.describe()).isEmpty();
                if (cast.srcBytes() == 4 && cast.dstBytes() == 1) {
                    assertThat(amax).as("%s n=%d amax", cast, n).isEqualTo(expectedAmax);
                }
            }
        }
    }

    /** Stochastic rounding depends on the element's global index only: any split gives the same bits. */
    @Test
    void stochasticIsIndependentOfChunking() {
        int n = 100_003;
        long seed = 99;
        SplittableRandom rnd = new SplittableRandom(SEED);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(4L * n);
            for (int i = 0; i < n; i++) {
                src.setAtIndex(F32, i, (float) rnd.nextGaussian());
            }
            MemorySegment whole = arena.allocate(2L * n);
            MemorySegment pieces = arena.allocate(2L * n);
            Casts.f32ToBf16Stochastic(whole, 0, src, 0, n, seed, 777);
            for (int from = 0; from < n; ) {
                int len = Math.min(n - from, 1 + rnd.nextInt(100));
                Casts.f32ToBf16Stochastic(pieces, from, src, from, len, seed, 777 + from);
                from += len;
            }
            assertThat(pieces.mismatch(whole)).as("first differing byte").isEqualTo(-1L);
            MemorySegment again = arena.allocate(2L * n);
            Casts.f32ToBf16Stochastic(again, 0, src, 0, n, seed + 1, 777);
            assertThat(again.mismatch(whole)).as("another seed rounds differently").isNotEqualTo(-1L);
        }
    }

    /** The float[] overloads give the same bits as the segment versions. */
    @Test
    void floatArrayOverloads() {
        int n = 1031;
        SplittableRandom rnd = new SplittableRandom(SEED);
        float[] x = new float[n + 2];
        for (int i = 0; i < x.length; i++) {
            x[i] = i < EDGES.length ? EDGES[i] : (float) (rnd.nextGaussian() * 300);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment xs = arena.allocate(4L * x.length);
            MemorySegment.copy(x, 0, xs, F32, 0, x.length);
            MemorySegment a = arena.allocate(2L * n), b = arena.allocate(2L * n);
            Casts.f32ToBf16(a, 0, x, 2, n);
            Casts.f32ToBf16(b, 0, xs, 2, n);
            assertThat(a.mismatch(b)).isEqualTo(-1L);
            Casts.f32ToF16(a, 0, x, 2, n);
            Casts.f32ToF16(b, 0, xs, 2, n);
            assertThat(a.mismatch(b)).isEqualTo(-1L);
            MemorySegment c = arena.allocate(n), d = arena.allocate(n);
            float amaxA = Casts.f32ToFp8(DType.FP8_E4M3, c, 0, x, 2, n, 0.5f, true);
            float amaxB = Casts.f32ToFp8(DType.FP8_E4M3, d, 0, xs, 2, n, 0.5f, true);
            assertThat(c.mismatch(d)).isEqualTo(-1L);
            assertThat(amaxA).isEqualTo(amaxB);

            float[] back = new float[n + 1];
            MemorySegment backSeg = arena.allocate(4L * n);
            Casts.bf16ToF32(back, 1, a, 0, n);
            Casts.bf16ToF32(backSeg, 0, a, 0, n);
            assertThat(MemorySegment.ofArray(back).asSlice(4).mismatch(backSeg)).isEqualTo(-1L);
            Casts.f16ToF32(back, 1, b, 0, n);
            Casts.f16ToF32(backSeg, 0, b, 0, n);
            assertThat(MemorySegment.ofArray(back).asSlice(4).mismatch(backSeg)).isEqualTo(-1L);
            Casts.fp8ToF32(DType.FP8_E4M3, back, 1, c, 0, n, 2f);
            Casts.fp8ToF32(DType.FP8_E4M3, backSeg, 0, c, 0, n, 2f);
            assertThat(MemorySegment.ofArray(back).asSlice(4).mismatch(backSeg)).isEqualTo(-1L);
        }
    }

    @Test
    void amaxIgnoresNaNAndSeesInfinity() {
        try (Arena arena = Arena.ofConfined()) {
            int n = 4 * Simd.lanes() * 3 + 5;
            MemorySegment src = arena.allocate(4L * n), dst = arena.allocate(n);
            src.setAtIndex(F32, 1, Float.NaN);
            src.setAtIndex(F32, n - 1, Float.NaN);
            src.setAtIndex(F32, 7, -3f);
            assertThat(Casts.f32ToFp8(DType.FP8_E5M2, dst, 0, src, 0, n, 1f, false)).isEqualTo(3f);
            src.setAtIndex(F32, 2, Float.NEGATIVE_INFINITY);
            assertThat(Casts.f32ToFp8(DType.FP8_E5M2, dst, 0, src, 0, n, 1f, false)).isEqualTo(Float.POSITIVE_INFINITY);
            assertThat(Casts.f32ToFp8(DType.FP8_E5M2, dst, 0, src, 0, 0, 1f, false)).isEqualTo(0f);
        }
    }

    @Test
    void argumentsAreCheckedAtTheEntry() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment f32 = arena.allocate(4 * 10), b16 = arena.allocate(2 * 10), b8 = arena.allocate(10);
            assertThatThrownBy(() -> Casts.f32ToBf16(b16, 0, f32, 0, -1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be >= 0, got -1");
            assertThatThrownBy(() -> Casts.f32ToBf16(b16, 0, f32, 3, 8))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("src holds 10 elements").hasMessageContaining("srcIndex 3 + n 8 = 11");
            assertThatThrownBy(() -> Casts.bf16ToF32(f32, 4, b16, 0, 7))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dst holds 10 elements");
            assertThatThrownBy(() -> Casts.f32ToF16(b16, -1, f32, 0, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dstIndex must be >= 0, got -1");
            assertThatThrownBy(() -> Casts.f32ToFp8(DType.BF16, b8, 0, f32, 0, 1, 1f, true))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("FP8_E4M3 or FP8_E5M2, got BF16");
            assertThatThrownBy(() -> Casts.f32ToFp8(DType.FP8_E4M3, b8, 0, f32, 0, 1, 0f, true))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scale must be finite and > 0");
            assertThatThrownBy(() -> Casts.fp8ToF32(DType.FP8_E4M3, f32, 0, b8, 0, 1, Float.NaN))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scaleInv must be finite");
            assertThatThrownBy(() -> Casts.f32ToBf16(f32.asReadOnly(), 0, f32, 0, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("read-only");
            assertThatThrownBy(() -> Casts.f32ToBf16(f32, 0, f32, 0, 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlap");
            assertThatThrownBy(() -> Casts.f32ToBf16(b16, 0, new float[3], 1, 3))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("src holds 3 elements");
            Casts.f32ToBf16(f32, 10, f32, 0, 0); // empty ranges never overlap, and index == size is fine for n = 0
        }
        Arena closed = Arena.ofConfined();
        MemorySegment gone = closed.allocate(40);
        closed.close();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ok = arena.allocate(40);
            assertThatThrownBy(() -> Casts.f32ToBf16(ok, 0, gone, 0, 1))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("src's memory has been freed");
            assertThatThrownBy(() -> Casts.bf16ToF32(gone, 0, ok, 0, 1))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("dst's memory has been freed");
        }
    }

    // ---------------------------------------------------------------------------------------------------- inputs

    /**
     * Fills elements [index, index+n): fp32 inputs mix the edge values, random bit patterns (NaNs with payloads
     * included) and values spread over 2^-30 … 2^20; code inputs are the edge codes, every code (in a scrambled
     * order) and random codes, mostly non-NaN so that the vector loops, which hand steps holding
     * a NaN to the scalar loop, get exercised too.
     */
    private static void fillInput(MemorySegment src, int bytes, long index, long n, SplittableRandom rnd) {
        for (long i = 0; i < n; i++) {
            long at = index + i;
            switch (bytes) {
                case 4 -> {
                    int kind = rnd.nextInt(10);
                    float x = i < EDGES.length ? EDGES[(int) i]
                            : kind == 0 ? EDGES[rnd.nextInt(EDGES.length)]
                            : kind <= 2 ? Float.intBitsToFloat(rnd.nextInt())
                            : (float) (rnd.nextGaussian() * Math.scalb(1.0, rnd.nextInt(-30, 20)));
                    src.set(F32, at * 4, x);
                }
                case 2 -> {
                    int h = i < EDGE_CODES16.length ? EDGE_CODES16[(int) i]
                            : i < 1 << 16 ? (int) (i * 40503 & 0xFFFF) // odd multiplier: a bijection, all codes
                            : rnd.nextInt(1 << 16);
                    if (i >= 1 << 16 && (h & 0x7C00) == 0x7C00 && rnd.nextInt(10) != 0) {
                        h &= ~0x4000; // mostly no inf/NaN
                    }
                    src.set(I16, at * 2, (short) h);
                }
                default -> src.set(I8, at, (byte) (i < EDGE_CODES8.length ? EDGE_CODES8[(int) i]
                        : i < 256 ? i * 167 : rnd.nextInt(256)));
            }
        }
    }

    private static int read(MemorySegment seg, int bytes, long index) {
        return switch (bytes) {
            case 4 -> Float.floatToRawIntBits(seg.get(F32, index * 4));
            case 2 -> seg.get(I16, index * 2) & 0xFFFF;
            default -> seg.get(I8, index) & 0xFF;
        };
    }

    private static int poisonBits(byte poison, int bytes) {
        int p = poison & 0xFF;
        return switch (bytes) {
            case 4 -> p * 0x0101_0101;
            case 2 -> p * 0x0101;
            default -> p;
        };
    }
}
