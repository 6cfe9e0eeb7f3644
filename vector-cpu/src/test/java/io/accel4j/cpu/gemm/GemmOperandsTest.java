package io.accel4j.cpu.gemm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * GEMM with bf16/fp16 operands: rounding while packing must give, bit for bit, what the fp32 GEMM gives on inputs
 * rounded beforehand with the scalar casts of {@link DType} (the same kernel then sums the same products in the same
 * order), on odd shapes, every layout, poisoned outputs, 1 and 3 threads; the inputs stay untouched; fp16 overflow
 * gives inf. No tolerance is needed: the comparison is exact.
 */
class GemmOperandsTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @ParameterizedTest(name = "{0} {1} M={2} N={3} K={4}")
    @CsvSource({
        "BF16, NN, 1, 1, 1", "BF16, NT, 7, 13, 5", "BF16, TN, 17, 31, 130", "BF16, TT, 47, 3, 257",
        "BF16, NT, 130, 97, 600", "FP16, NN, 5, 16, 3", "FP16, NT, 31, 17, 64", "FP16, TN, 97, 47, 13",
        "FP16, TT, 2, 257, 31", "FP16, NT, 150, 40, 530"})
    void roundingWhilePackingEqualsRoundingFirst(DType operands, Layout layout, int M, int N, int K) {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        String what = operands + " " + layout + " M=" + M + " N=" + N + " K=" + K + " seed=" + seed;
        int aLen = layout.storedRowsA(M, K) * layout.storedColsA(M, K);
        int bLen = layout.storedRowsB(K, N) * layout.storedColsB(K, N);
        try (Arena arena = Arena.ofShared()) {
            // fp16's subnormal range too: some inputs of magnitude below 2^-14
            float[] a = random(rnd, aLen), b = random(rnd, bLen), bias = random(rnd, N);
            MemorySegment sa = segment(arena, a), sb = segment(arena, b), sBias = segment(arena, bias);
            MemorySegment ra = segment(arena, rounded(a, operands)), rb = segment(arena, rounded(b, operands));
            MemorySegment expected = arena.allocate((long) M * N * Float.BYTES);
            Gemm.gemm(POOLS.one(), layout, M, N, K, 0.75f, ra, DType.FP32, layout.storedColsA(M, K), 1f,
                    rb, DType.FP32, layout.storedColsB(K, N), 1f, 0f, expected, DType.FP32, N, sBias);
            for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
                MemorySegment c = poisoned(arena, (long) M * N);
                Gemm.gemm(pool, layout, M, N, K, 0.75f, sa, DType.FP32, layout.storedColsA(M, K), 1f,
                        sb, DType.FP32, layout.storedColsB(K, N), 1f, 0f, c, DType.FP32, N, sBias, operands);
                assertThat(c.toArray(F32)).as(what + " threads=" + pool.threads())
                        .containsExactly(expected.toArray(F32));
            }
            assertThat(sa.toArray(F32)).as("A unchanged").containsExactly(a);
            assertThat(sb.toArray(F32)).as("B unchanged").containsExactly(b);
        }
    }

    @Test
    void narrowStoredInputsAreRoundedToTheOperandFormatToo() {
        // a bf16 A has 8 bits of mantissa, fp16 operands keep 11 but a smaller range: 1e6 becomes inf
        int M = 3, N = 5, K = 7;
        SplittableRandom rnd = new SplittableRandom(3);
        try (Arena arena = Arena.ofShared()) {
            float[] a = random(rnd, M * K), b = random(rnd, K * N);
            a[4] = 1e6f;
            MemorySegment aBf16 = arena.allocate((long) a.length * 2);
            float[] aDecoded = new float[a.length];
            for (int i = 0; i < a.length; i++) {
                DType.BF16.setFloat(aBf16, i, a[i], false);
                aDecoded[i] = DType.BF16.getFloat(aBf16, i);
            }
            MemorySegment expected = arena.allocate((long) M * N * Float.BYTES);
            Gemm.gemm(POOLS.one(), Layout.NN, M, N, K, 1f, segment(arena, rounded(aDecoded, DType.FP16)), DType.FP32, K,
                    1f, segment(arena, rounded(b, DType.FP16)), DType.FP32, N, 1f, 0f, expected, DType.FP32, N, null);
            MemorySegment c = poisoned(arena, (long) M * N);
            Gemm.gemm(POOLS.one(), Layout.NN, M, N, K, 1f, aBf16, DType.BF16, K, 1f, segment(arena, b), DType.FP32, N, 1f,
                    0f, c, DType.FP32, N, null, DType.FP16);
            assertThat(c.toArray(F32)).containsExactly(expected.toArray(F32));
            assertThat(c.getAtIndex(F32, 0)).as("row 0 holds the overflowed 1e6").isInfinite();
        }
    }

    @Test
    void fp16OverflowGivesInfinityWhereBf16AndFp32DoNot() {
        // 70000 > 65504 (fp16's max; 65520 and up round to inf); K = 1, B = 1: C = A exactly in fp32 and bf16
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = segment(arena, new float[] {70000f, -70000f, 65504f, 1f});
            MemorySegment b = segment(arena, new float[] {1f});
            float[][] results = new float[3][];
            DType[] precisions = {DType.FP32, DType.BF16, DType.FP16};
            for (int p = 0; p < 3; p++) {
                MemorySegment c = poisoned(arena, 4);
                Gemm.gemm(POOLS.one(), Layout.NN, 4, 1, 1, 1f, a, DType.FP32, 1, 1f, b, DType.FP32, 1, 1f, 0f, c,
                        DType.FP32, 1, null, precisions[p]);
                results[p] = c.toArray(F32);
            }
            assertThat(results[0]).containsExactly(70000f, -70000f, 65504f, 1f);
            assertThat(results[1]).containsExactly(70144f, -70144f, 65536f, 1f); // bf16: 8 bits of mantissa
            assertThat(results[2]).containsExactly(Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 65504f, 1f);
        }
    }

    @Test
    void otherOperandTypesAreRefused() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = arena.allocate(64);
            assertThatThrownBy(() -> Gemm.gemm(POOLS.one(), Layout.NN, 1, 1, 1, 1f, s, DType.FP32, 1, 1f,
                    s.asSlice(16), DType.FP32, 1, 1f, 0f, s.asSlice(32), DType.FP32, 1, null, DType.FP8_E4M3))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("operands must be FP32, BF16 or FP16, got FP8_E4M3");
        }
    }

    /** Values in [−1, 1), one in eight scaled down into fp16's subnormals (|x| < 2^-14). */
    private static float[] random(SplittableRandom rnd, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) ((rnd.nextDouble() * 2 - 1) * (rnd.nextInt(8) == 0 ? 0x1p-16 : 1));
        }
        return x;
    }

    /** The scalar casts of {@link DType}: nearest-even to {@code t} and back. */
    private static float[] rounded(float[] x, DType t) {
        float[] r = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = t.decode(t.encode(x[i], false));
        }
        return r;
    }

    private static MemorySegment segment(Arena arena, float[] x) {
        MemorySegment s = arena.allocate(Math.max(1, x.length) * (long) Float.BYTES);
        MemorySegment.copy(x, 0, s, F32, 0, x.length);
        return s;
    }

    private static MemorySegment poisoned(Arena arena, long n) {
        MemorySegment s = arena.allocate(n * Float.BYTES);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(F32, i, Float.NaN);
        }
        return s;
    }
}
