package io.accel4j.cpu.gemm;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Simd;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link Transpose}, {@link Packing#packB}'s fp32 paths (B stored transposed, through the in-register transposes,
 * and B stored K×N, straight from the segment) and {@link Packing#packA}'s (A in either layout): all copies, so every
 * element is compared exactly (no tolerance) against the layout written as a formula, on random values at odd sizes
 * and offsets, the destination poisoned with NaN first so that an element left unwritten fails.
 */
class PackingTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    @Test
    void aBlockIsTransposedExactly() {
        if (!Transpose.AVAILABLE) {
            assertThat(Simd.SCALAR || Transpose.L > 16).as("only scalar mode lacks a transpose").isTrue();
            return;
        }
        int L = Transpose.L;
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int trial = 0; trial < 20; trial++) {
            int ld = L + rnd.nextInt(0, 40), ldd = L + rnd.nextInt(0, 40);
            int srcIndex = rnd.nextInt(0, 17), dstIndex = rnd.nextInt(0, 17);
            try (Arena arena = Arena.ofConfined()) {
                float[] values = new float[srcIndex + L * ld];
                for (int i = 0; i < values.length; i++) {
                    values[i] = (float) rnd.nextGaussian();
                }
                MemorySegment src = arena.allocate((long) values.length * Float.BYTES);
                MemorySegment.copy(values, 0, src, F32, 0, values.length);
                float[] dst = new float[dstIndex + L * ldd];
                Arrays.fill(dst, Float.NaN);
                Transpose.block(src, srcIndex, ld, dst, dstIndex, ldd);
                for (int k = 0; k < L; k++) {
                    for (int r = 0; r < L; r++) {
                        assertThat(dst[dstIndex + k * ldd + r]).as("seed %d: element (%d, %d)", seed, r, k)
                                .isEqualTo(values[srcIndex + r * ld + k]);
                    }
                }
                for (int i = 0; i < dst.length; i++) { // nothing outside the block written
                    int off = i - dstIndex;
                    if (off < 0 || off % ldd >= L) {
                        assertThat(dst[i]).as("seed %d: dst[%d] outside the block", seed, i).isNaN();
                    }
                }
            }
        }
    }

    /**
     * {@link Packing#packB} of a transposed fp32 B (stored N×K): panels of NR columns, K blocks of {@code kcBlock}
     * rows, columns nc…roundUp(nc, NR) zero; sizes that leave partial vector blocks in both directions, and a packed
     * block wider than the columns packed (bpCol0 &gt; 0).
     */
    @ParameterizedTest(name = "nc={0} K={1} kcBlock={2} j0={3} bpCol0={4}")
    @CsvSource({"1, 1, 1, 0, 0", "37, 100, 48, 0, 0", "64, 512, 512, 3, 0", "70, 300, 256, 5, 32",
        "33, 17, 512, 0, 64", "128, 1030, 512, 1, 0", "16, 64, 33, 2, 0"})
    void transposedPackMatchesItsLayout(int nc, int K, int kcBlock, int j0, int bpCol0) {
        packMatchesItsLayout(true, nc, K, kcBlock, j0, bpCol0);
    }

    @ParameterizedTest(name = "nc={0} K={1} kcBlock={2} j0={3} bpCol0={4}")
    @CsvSource({"1, 1, 1, 0, 0", "37, 100, 48, 0, 0", "64, 512, 512, 3, 0", "70, 300, 256, 5, 32",
        "33, 17, 512, 0, 64", "128, 1030, 512, 1, 0", "16, 64, 33, 2, 0"})
    void rowPackMatchesItsLayout(int nc, int K, int kcBlock, int j0, int bpCol0) {
        packMatchesItsLayout(false, nc, K, kcBlock, j0, bpCol0);
    }

    /** B stored N×K (transB) or K×N, row length ldb a little longer than the stored row. */
    private static void packMatchesItsLayout(boolean transB, int nc, int K, int kcBlock, int j0, int bpCol0) {
        int NR = MicroKernel.NR;
        int ncPad = Packing.roundUp(nc, NR);
        int bpCols = bpCol0 + ncPad + NR; // a block wider than this call's columns
        int ldb = (transB ? K : j0 + nc) + 3;
        int rows = transB ? j0 + nc : K;
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        try (Arena arena = Arena.ofConfined()) {
            float[] values = new float[rows * ldb];
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) rnd.nextGaussian();
            }
            MemorySegment b = arena.allocate((long) values.length * Float.BYTES);
            MemorySegment.copy(values, 0, b, F32, 0, values.length);
            float[] bp = new float[K * bpCols];
            Arrays.fill(bp, Float.NaN);
            float[] run = new float[Math.max(NR * K, ncPad)];
            Packing.packB(transB, b, DType.FP32, ldb, K, kcBlock, j0, nc, bp, bpCols, bpCol0, run, DType.FP32);
            for (int pc = 0; pc < K; pc += kcBlock) {
                int kc = Math.min(kcBlock, K - pc);
                for (int j = 0; j < ncPad; j++) {
                    for (int k = pc; k < pc + kc; k++) {
                        int at = pc * bpCols + (bpCol0 + j / NR * NR) * kc + (k - pc) * NR + j % NR;
                        float want = j >= nc ? 0f : values[transB ? (j0 + j) * ldb + k : k * ldb + j0 + j];
                        assertThat(bp[at]).as("seed %d transB %b: op(B)[%d][%d] at %d", seed, transB, k, j, at)
                                .isEqualTo(want);
                    }
                }
            }
        }
    }

    /**
     * {@link Packing#packA} of fp32 A, either layout: panels of MR rows of op(A), k-major, rows mc…roundUp(mc, MR)
     * zero. The transposed layout copies five values with an 8-float load and store: A is allocated to end exactly at
     * the block's last value (p0 + kc = K rows, i0 + mc = lda columns), so a load past the segment's end would throw,
     * and a panel's extra stored floats that were not overwritten would show as wrong values.
     */
    @ParameterizedTest(name = "transA={0} mc={1} kc={2} i0={3} p0={4} pad={5}")
    @CsvSource({"true, 1, 1, 0, 0, 0", "true, 5, 7, 0, 0, 0", "true, 144, 256, 0, 0, 0", "true, 143, 256, 5, 3, 0",
        "true, 72, 512, 10, 1, 0", "true, 13, 33, 2, 0, 1", "true, 15, 2, 0, 5, 2", "true, 37, 100, 0, 0, 3",
        "false, 1, 1, 0, 0, 0", "false, 72, 512, 5, 3, 0", "false, 13, 33, 2, 0, 1", "false, 37, 100, 0, 1, 3"})
    void aPackMatchesItsLayout(boolean transA, int mc, int kc, int i0, int p0, int pad) {
        int MR = MicroKernel.MR;
        int M = i0 + mc, K = p0 + kc;
        int lda = (transA ? M : K) + pad;
        int rows = transA ? K : M;
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        try (Arena arena = Arena.ofConfined()) {
            float[] values = new float[rows * lda - pad]; // ends at the last stored value
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) rnd.nextGaussian();
            }
            MemorySegment a = arena.allocate((long) values.length * Float.BYTES);
            MemorySegment.copy(values, 0, a, F32, 0, values.length);
            int mcPad = Packing.roundUp(mc, MR);
            float[] ap = new float[mcPad * kc + 8];
            Arrays.fill(ap, Float.NaN);
            float[] run = new float[Math.max(MR * kc, mc)];
            Packing.packA(transA, a, DType.FP32, lda, i0, mc, p0, kc, ap, run, DType.FP32);
            for (int i = 0; i < mcPad; i++) {
                for (int k = 0; k < kc; k++) {
                    int at = i / MR * MR * kc + k * MR + i % MR;
                    float want = i >= mc ? 0f
                            : values[transA ? (p0 + k) * lda + i0 + i : (i0 + i) * lda + p0 + k];
                    assertThat(ap[at]).as("seed %d transA %b: op(A)[%d][%d] at %d", seed, transA, i, k, at)
                            .isEqualTo(want);
                }
            }
            for (int i = mcPad * kc; i < ap.length; i++) {
                assertThat(ap[i]).as("seed %d transA %b: ap[%d] past the block", seed, transA, i).isNaN();
            }
        }
    }
}
