package io.accel4j.cpu.gemm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.GemmRef;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The fast GEMM against float64 truth and against the naive fp32 reference, on odd shapes, every layout and input
 * dtype, with the output poisoned first.
 *
 * <p>Tolerance: each output is a K-term fp32 dot product (one rounding per fma) scaled by alpha, plus beta·C and a
 * bias. Recursive summation of K terms is off by at most (K−1)·u·Σ|aₖbₖ| (u = 2⁻²⁴), so we allow
 * {@code 2·(K+2)·u·(|alpha|·Σ|aₖbₖ| + |beta·c| + |bias|)}; the factor 2 covers the alpha, beta and bias roundings.
 * A BF16 output adds its own rounding, half an ulp of 8 bits: 2⁻⁸·|value|. Narrow inputs are decoded exactly, so
 * they do not widen the bound.
 */
class GemmTest {

    static final double U = 0x1p-24;
    static final int[] ODD = {1, 2, 3, 5, 7, 13, 16, 17, 31, 47, 64, 97, 130, 257};

    static Parallel pool1;
    static Parallel pool2;
    static Parallel pool3;

    @BeforeAll
    static void pools() {
        pool1 = new Parallel(1);
        pool2 = new Parallel(2);
        pool3 = new Parallel(3);
    }

    @AfterAll
    static void closePools() {
        pool1.close();
        pool2.close();
        pool3.close();
    }

    /** One random problem, owning its memory. */
    static final class Case implements AutoCloseable {
        final Arena arena = Arena.ofShared();
        final long seed;
        final Layout layout;
        final int M, N, K, lda, ldb, ldc;
        final DType aType, bType, cType;
        final float alpha, beta, scaleA, scaleB;
        final MemorySegment a, b, c, c0, bias;

        Case(long seed, Layout layout, int M, int N, int K, DType aType, DType bType, DType cType,
             boolean withBeta, boolean withBias) {
            this.seed = seed;
            SplittableRandom rnd = new SplittableRandom(seed);
            this.layout = layout;
            this.M = M;
            this.N = N;
            this.K = K;
            this.aType = aType;
            this.bType = bType;
            this.cType = cType;
            this.lda = Math.max(1, layout.storedColsA(M, K)) + rnd.nextInt(3);
            this.ldb = Math.max(1, layout.storedColsB(K, N)) + rnd.nextInt(3);
            this.ldc = N + rnd.nextInt(3);
            this.alpha = (float) (0.5 + rnd.nextDouble());
            this.beta = withBeta ? (float) (rnd.nextDouble() - 0.5) : 0f;
            boolean fp8 = aType.byteSize() == 1 || bType.byteSize() == 1;
            this.scaleA = fp8 ? (float) (0.25 + rnd.nextDouble()) : 1f;
            this.scaleB = fp8 ? (float) (0.25 + rnd.nextDouble()) : 1f;
            this.a = fill(rnd, aType, (long) layout.storedRowsA(M, K) * lda, fp8 ? 8 : 1);
            this.b = fill(rnd, bType, (long) layout.storedRowsB(K, N) * ldb, fp8 ? 8 : 1);
            this.c0 = fill(rnd, cType, (long) M * ldc, 1);
            this.c = arena.allocate(c0.byteSize());
            this.bias = withBias ? fill(rnd, DType.FP32, N, 1) : null;
            resetC();
        }

        MemorySegment fill(SplittableRandom rnd, DType t, long n, double range) {
            MemorySegment s = arena.allocate(Math.max(1, n) * t.byteSize());
            for (long i = 0; i < n; i++) {
                t.setFloat(s, i, (float) ((rnd.nextDouble() * 2 - 1) * range), true);
            }
            return s;
        }

        /** C back to its initial values, or all NaN when beta is 0 (so an unwanted read shows). */
        void resetC() {
            if (beta == 0f) {
                for (long i = 0; i < (long) M * ldc; i++) {
                    cType.setFloat(c, i, Float.NaN, false);
                }
            } else {
                c.copyFrom(c0);
            }
        }

        void runFast(Parallel pool) {
            Gemm.gemm(pool, layout, M, N, K, alpha, a, aType, lda, scaleA, b, bType, ldb, scaleB,
                    beta, c, cType, ldc, bias);
        }

        void runRef() {
            GemmRef.gemm(layout, M, N, K, alpha, a, aType, lda, scaleA, b, bType, ldb, scaleB,
                    beta, c, cType, ldc, bias);
        }

        double[] exact() {
            return GemmRef.gemmF64(layout, M, N, K, alpha, a, aType, lda, scaleA, b, bType, ldb, scaleB,
                    beta, c0, cType, ldc, bias);
        }

        /** The error bound of every element (see the class comment). */
        double[] bound() {
            MemorySegment absA = abs(a, aType, (long) layout.storedRowsA(M, K) * lda);
            MemorySegment absB = abs(b, bType, (long) layout.storedRowsB(K, N) * ldb);
            double[] s = GemmRef.gemmF64(layout, M, N, K, 1, absA, DType.FP32, lda, 1, absB, DType.FP32, ldb, 1,
                    0, c0, cType, ldc, null);
            double[] tol = new double[M * N];
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double t = Math.abs(alpha * (double) scaleA * scaleB) * s[i * N + j];
                    if (beta != 0f) {
                        t += Math.abs(beta * cType.getFloat(c0, (long) i * ldc + j));
                    }
                    if (bias != null) {
                        t += Math.abs(bias.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, j));
                    }
                    tol[i * N + j] = 2 * (K + 2) * U * t + Float.MIN_NORMAL;
                }
            }
            return tol;
        }

        MemorySegment abs(MemorySegment s, DType t, long n) {
            MemorySegment out = arena.allocate(Math.max(1, n) * Float.BYTES);
            for (long i = 0; i < n; i++) {
                out.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, Math.abs(t.getFloat(s, i)));
            }
            return out;
        }

        float cAt(int i, int j) {
            return cType.getFloat(c, (long) i * ldc + j);
        }

        /** Checks every element of C against the exact result; the gap between rows is left untouched. */
        void assertClose(String what) {
            double[] exact = exact();
            double[] tol = bound();
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double t = tol[i * N + j] + (cType == DType.BF16 ? 0x1p-8 * Math.abs(exact[i * N + j]) : 0);
                    float got = cAt(i, j);
                    if (!(Math.abs(got - exact[i * N + j]) <= t)) {
                        fail("%s: C[%d][%d] = %s, exact %s, tolerance %s (%s)", what, i, j, got, exact[i * N + j],
                                t, this);
                    }
                }
                if (beta != 0f) {
                    for (int j = N; j < ldc && i < M - 1; j++) {
                        assertThat(cType.getFloat(c, (long) i * ldc + j))
                                .as("padding C[%d][%d] must not be written (%s)", i, j, this)
                                .isEqualTo(cType.getFloat(c0, (long) i * ldc + j));
                    }
                }
            }
        }

        @Override
        public void close() {
            arena.close();
        }

        @Override
        public String toString() {
            return "seed=" + seed + " " + layout + " M=" + M + " N=" + N + " K=" + K + " lda=" + lda + " ldb=" + ldb
                    + " ldc=" + ldc + " " + aType + "×" + bType + "→" + cType + " alpha=" + alpha + " beta=" + beta
                    + " bias=" + (bias != null);
        }
    }

    static long seed() {
        return System.nanoTime();
    }

    @ParameterizedTest
    @EnumSource(Layout.class)
    void fp32OddShapesMatchFloat64AndReference(Layout layout) {
        SplittableRandom pick = new SplittableRandom(seed());
        for (int trial = 0; trial < 40; trial++) {
            int M = ODD[pick.nextInt(ODD.length)];
            int N = ODD[pick.nextInt(ODD.length)];
            int K = ODD[pick.nextInt(ODD.length)];
            try (Case c = new Case(pick.nextLong(), layout, M, N, K, DType.FP32, DType.FP32, DType.FP32,
                    pick.nextBoolean(), pick.nextBoolean())) {
                c.runFast(pool2);
                c.assertClose("fast");
                c.resetC();
                c.runRef();
                c.assertClose("reference");
            }
        }
    }

    @Test
    void blockEdgesAreCovered() {
        // Sizes straddling MC, KC, NR and MR so that every partial block and tile shows up.
        int[] ms = {GemmDriver.MC - 1, GemmDriver.MC + 1, 2 * GemmDriver.MC + 5};
        int[] ks = {GemmDriver.KC - 1, GemmDriver.KC + 1, 2 * GemmDriver.KC + 3};
        int[] ns = {MicroKernel.NR - 1, MicroKernel.NR + 1, 5 * MicroKernel.NR + 3};
        long s = seed();
        for (Layout layout : Layout.values()) {
            for (int i = 0; i < 3; i++) {
                try (Case c = new Case(s + i, layout, ms[i], ns[(i + 1) % 3], ks[(i + 2) % 3], DType.FP32,
                        DType.FP32, DType.FP32, true, true)) {
                    c.runFast(pool2);
                    c.assertClose("fast");
                }
            }
        }
    }

    @Test
    void rowsAreCutIntoOneTaskPerBlockOfA() {
        // Deep K: one task per MC rows (1024 rows: 15 with MC 72), so a preempted thread does fewer of them;
        // rounded up to a multiple of the threads, so that two unloaded threads get as many each.
        int blocks = (1024 + GemmDriver.MC - 1) / GemmDriver.MC;
        assertThat(GemmDriver.rowTasks(1, 1024, 1024)).isEqualTo(blocks);
        assertThat(GemmDriver.rowTasks(2, 1024, 1024)).isEqualTo((blocks + 1) / 2 * 2);
        assertThat(GemmDriver.rowTasks(3, 1024, 1024)).isEqualTo((blocks + 2) / 3 * 3);
        // Shallow K: blocks of shallowBlockRows; never fewer tasks than threads, never more than row tiles.
        int shallow = GemmDriver.shallowBlockRows(256);
        assertThat(GemmDriver.rowTasks(2, 256, 256)).isEqualTo(Math.max(2, (256 + shallow - 1) / shallow));
        assertThat(GemmDriver.rowTasks(8, 3 * MicroKernel.MR, 1024)).isEqualTo(3);
        assertThat(GemmDriver.rowTasks(3, 2 * GemmDriver.MC + 1, 1024)).isEqualTo(3);
    }

    @Test
    void shallowProductsUseTallBlocksAndColumnSubBlocks() {
        // K ≤ KC: taller A blocks and column sub-blocks; sizes straddle both, and K at 1, 255 and KC.
        assertThat(GemmDriver.shallowBlockRows(GemmDriver.KC)).isEqualTo(GemmDriver.MC);
        assertThat(GemmDriver.shallowBlockRows(1)).isEqualTo(GemmDriver.SHALLOW_ROWS_MAX);
        SplittableRandom pick = new SplittableRandom(seed());
        for (Layout layout : Layout.values()) {
            for (int K : new int[] {1, 255, GemmDriver.KC}) {
                int rows = GemmDriver.shallowBlockRows(K);
                int sub = GemmDriver.subBlockColumns(rows);
                try (Case c = new Case(pick.nextLong(), layout, rows + 7, 2 * sub + 3, K, DType.FP32, DType.FP32,
                        DType.FP32, pick.nextBoolean(), pick.nextBoolean())) {
                    c.runFast(pool2);
                    c.assertClose("shallow");
                }
            }
        }
    }

    @Test
    void wideShallowProductsAreSplitIntoColumnBlocks() {
        // K small and N past NC_MAX: several B blocks, and the accumulator stays bounded (MC × NC_MAX floats).
        assertThat(GemmDriver.blockColumns(1 << 20, 1)).isEqualTo(GemmDriver.NC_MAX);
        assertThat(GemmDriver.blockColumns(100, 3)).isEqualTo(Packing.roundUp(100, MicroKernel.NR));
        // Rows × K past what NarrowProduct packs whole, so the block route runs: bit for bit the same product cut
        // into column slices of one block each (whose route the float64 tests above cover).
        int M = 193, K = GemmDriver.KC, N = GemmDriver.NC_MAX + 37;
        assertThat(NarrowProduct.applies(M, N, K)).isFalse();
        try (Case c = new Case(seed(), Layout.NT, M, N, K, DType.FP32, DType.FP32, DType.FP32, true, true)) {
            c.runFast(pool2);
            assertSameAsColumnSlices(c, GemmDriver.NC_MAX - 3);
        }
    }

    /** C as computed equals, bit for bit, the product recomputed slice by slice of {@code slice} columns. */
    private static void assertSameAsColumnSlices(Case c, int slice) {
        MemorySegment whole = Arena.ofAuto().allocate(c.c.byteSize()).copyFrom(c.c);
        c.resetC();
        for (int j0 = 0; j0 < c.N; j0 += slice) {
            int n = Math.min(slice, c.N - j0);
            long bOff = (c.layout.transB() ? (long) j0 * c.ldb : j0) * Float.BYTES;
            Gemm.gemm(pool2, c.layout, c.M, n, c.K, c.alpha, c.a, DType.FP32, c.lda, 1f, c.b.asSlice(bOff),
                    DType.FP32, c.ldb, 1f, c.beta, c.c.asSlice((long) j0 * Float.BYTES), DType.FP32, c.ldc,
                    c.bias == null ? null : c.bias.asSlice((long) j0 * Float.BYTES));
        }
        assertThat(c.c.mismatch(whole)).as("whole vs column slices: %s", c).isEqualTo(-1L);
    }

    @Test
    void narrowProductsApplyToShortWideShallowShapes() {
        assertThat(NarrowProduct.applies(256, 50304, 256)).as("the LM head's logits").isTrue();
        assertThat(NarrowProduct.applies(256, GemmDriver.NC_MAX, 256)).as("one B block").isFalse();
        assertThat(NarrowProduct.applies(256, 50304, GemmDriver.KC + 1)).as("two K blocks").isFalse();
        assertThat(NarrowProduct.applies(1024, 50304, 256)).as("A too big to pack whole").isFalse();
    }

    /**
     * A narrow product (odd M, N past NC_MAX, K from 1 to KC; every layout; beta and bias at random; C poisoned
     * when beta is 0) against float64 (K below KC), and bit for bit against the same product cut into column slices narrower
     * than one B block, which the block route computes: each element must be the same fma chain either way.
     */
    @Test
    void narrowProductsMatchFloat64AndTheBlockRouteBitForBit() {
        SplittableRandom pick = new SplittableRandom(seed());
        for (Layout layout : Layout.values()) {
            for (int K : new int[] {1, 37, GemmDriver.KC}) {
                int M = 1 + 2 * pick.nextInt(20); // odd, 1…39
                int N = GemmDriver.NC_MAX + 1 + 2 * pick.nextInt(300);
                assertThat(NarrowProduct.applies(M, N, K)).isTrue();
                try (Case c = new Case(pick.nextLong(), layout, M, N, K, DType.FP32, DType.FP32, DType.FP32,
                        pick.nextBoolean(), pick.nextBoolean())) {
                    c.runFast(pool2);
                    if (K < GemmDriver.KC) { // the float64 bound costs seconds at K = KC; the bits cover it there
                        c.assertClose("narrow");
                    }
                    assertThat(NarrowProduct.applies(M, GemmDriver.NC_MAX / 2 + 5, K)).isFalse();
                    assertSameAsColumnSlices(c, GemmDriver.NC_MAX / 2 + 5); // not a multiple of NR either
                }
            }
        }
    }

    @Test
    void zeroSizesAndEmptyK() {
        try (Case c = new Case(seed(), Layout.NN, 5, 7, 0, DType.FP32, DType.FP32, DType.FP32, true, true)) {
            c.runFast(pool2);
            c.assertClose("K=0: C = beta·C + bias");
        }
        try (Case c = new Case(seed(), Layout.NT, 0, 7, 5, DType.FP32, DType.FP32, DType.FP32, false, false)) {
            c.runFast(pool2); // nothing to do, nothing thrown
        }
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "FP16"})
    void halfPrecisionInputsFp32AndBf16Output(DType in) {
        SplittableRandom pick = new SplittableRandom(seed());
        for (Layout layout : Layout.values()) {
            for (DType out : new DType[] {DType.FP32, DType.BF16}) {
                int M = ODD[pick.nextInt(ODD.length)];
                int N = ODD[pick.nextInt(ODD.length)];
                int K = ODD[pick.nextInt(ODD.length)] + GemmDriver.KC; // two K blocks into a bf16 C
                try (Case c = new Case(pick.nextLong(), layout, M, N, K, in, in, out, pick.nextBoolean(), true)) {
                    c.runFast(pool2);
                    c.assertClose("fast");
                }
            }
        }
    }

    @Test
    void fp8InputsWithScales() {
        SplittableRandom pick = new SplittableRandom(seed());
        DType[][] pairs = {{DType.FP8_E4M3, DType.FP8_E4M3}, {DType.FP8_E4M3, DType.FP8_E5M2}};
        for (DType[] p : pairs) {
            for (Layout layout : Layout.values()) {
                int M = ODD[pick.nextInt(ODD.length)];
                int N = ODD[pick.nextInt(ODD.length)];
                int K = ODD[pick.nextInt(ODD.length)];
                try (Case c = new Case(pick.nextLong(), layout, M, N, K, p[0], p[1], DType.FP32, false, false)) {
                    assertThat(c.scaleA).isNotEqualTo(1f);
                    c.runFast(pool2);
                    c.assertClose("fast");
                }
            }
        }
    }

    @Test
    void resultDoesNotDependOnThreadCount() {
        long s = seed();
        for (Layout layout : Layout.values()) {
            for (int[] mnk : new int[][] {{301, 37, 290}, {37, 301, 290}}) {
                try (Case c = new Case(s, layout, mnk[0], mnk[1], mnk[2], DType.FP32, DType.FP32, DType.FP32,
                        true, true)) {
                    c.runFast(pool1);
                    MemorySegment one = Arena.ofAuto().allocate(c.c.byteSize()).copyFrom(c.c);
                    for (Parallel p : new Parallel[] {pool2, pool3}) {
                        c.resetC();
                        c.runFast(p);
                        assertThat(c.c.mismatch(one)).as("%s threads vs 1: %s", p.threads(), c).isEqualTo(-1L);
                    }
                }
            }
        }
    }

    @Test
    void smallBIsPackedByEveryThreadWhenTheRowsSuffice() {
        // The bench model's 256-row products (B at most 256×1024) split by rows, each thread packing B; the LM head's
        // forward (B 50304×256) and products with too few rows keep the column split.
        assertThat(GemmDriver.packsBPerThread(2, 256, 1024, 256)).as("MLP up/down").isTrue();
        assertThat(GemmDriver.packsBPerThread(2, 256, 256, 1024)).as("deep K, small B").isTrue();
        assertThat(GemmDriver.packsBPerThread(2, 256, 50304, 256)).as("LM head forward").isFalse();
        assertThat(GemmDriver.packsBPerThread(2, 7 * MicroKernel.MR, 1024, 256)).as("7 row tiles").isFalse();
        // Bit for bit the 1-thread result, shallow (K ≤ KC) and deep K, and close to the reference.
        long s = seed();
        for (Layout layout : Layout.values()) {
            for (int[] mnk : new int[][] {{256, 400, 290}, {203, 400, GemmDriver.KC + 37}}) {
                for (Parallel p : new Parallel[] {pool2, pool3}) {
                    assertThat(GemmDriver.splitsColumns(p.threads(), mnk[0], mnk[1])).isTrue();
                    assertThat(GemmDriver.packsBPerThread(p.threads(), mnk[0], mnk[1], mnk[2])).isTrue();
                }
                try (Case c = new Case(s, layout, mnk[0], mnk[1], mnk[2], DType.FP32, DType.FP32, DType.FP32,
                        true, true)) {
                    c.runFast(pool1);
                    c.assertClose("1 thread");
                    MemorySegment one = Arena.ofAuto().allocate(c.c.byteSize()).copyFrom(c.c);
                    for (Parallel p : new Parallel[] {pool2, pool3}) {
                        c.resetC();
                        c.runFast(p);
                        assertThat(c.c.mismatch(one)).as("%s threads vs 1: %s", p.threads(), c).isEqualTo(-1L);
                    }
                }
            }
        }
    }

    @Test
    void longReductionsAreSplitIntoChunksOfK() {
        // K past SPLIT_K_MIN_DEPTH into a small C: split K, with a short last chunk (K not a multiple of K_CHUNK)
        // and, for the odd M and N, partial row and column tiles. Poisoned C when beta is 0.
        int deep = GemmDriver.SPLIT_K_MIN_DEPTH + 2 * GemmDriver.KC + 37;
        int[][] mnk = {{7, 13, deep}, {37, 3, deep + GemmDriver.K_CHUNK}, {1, 1, GemmDriver.SPLIT_K_MIN_DEPTH}};
        SplittableRandom pick = new SplittableRandom(seed());
        for (Layout layout : Layout.values()) {
            for (int[] s : mnk) {
                assertThat(GemmDriver.splitsK(s[0], s[1], s[2])).as("%s", java.util.Arrays.toString(s)).isTrue();
                try (Case c = new Case(pick.nextLong(), layout, s[0], s[1], s[2], DType.FP32, DType.FP32, DType.FP32,
                        pick.nextBoolean(), pick.nextBoolean())) {
                    c.runFast(pool2);
                    c.assertClose("split K");
                }
            }
        }
    }

    @Test
    void splitKNeedsADeepReductionIntoASmallProduct() {
        assertThat(GemmDriver.splitsK(256, 256, 50304)).as("the LM head's dinp").isTrue();
        assertThat(GemmDriver.splitsK(256, 256, GemmDriver.SPLIT_K_MIN_DEPTH - 1)).as("too shallow").isFalse();
        assertThat(GemmDriver.splitsK(1024, 1024, 50304)).as("partials too big").isFalse();
        assertThat(GemmDriver.splitsK(16, GemmDriver.NC_MAX + 1, 50304)).as("too wide for a B chunk").isFalse();
    }

    @Test
    void splitKDoesNotDependOnThreadCount() {
        long s = seed();
        for (Layout layout : new Layout[] {Layout.NN, Layout.TT}) {
            try (Case c = new Case(s, layout, 61, 37, 5 * GemmDriver.K_CHUNK + 3, DType.FP32, DType.FP32,
                    DType.FP32, true, true)) {
                c.runFast(pool1);
                MemorySegment one = Arena.ofAuto().allocate(c.c.byteSize()).copyFrom(c.c);
                for (Parallel p : new Parallel[] {pool2, pool3}) {
                    c.resetC();
                    c.runFast(p);
                    assertThat(c.c.mismatch(one)).as("%s threads vs 1: %s", p.threads(), c).isEqualTo(-1L);
                }
                c.resetC();
                c.runFast(pool3);
                c.assertClose("split K on 3 threads");
            }
        }
    }

    @Property(tries = 60)
    void anyShapeAnyLayout(@ForAll @IntRange(min = 1, max = 150) int M, @ForAll @IntRange(min = 1, max = 150) int N,
                           @ForAll @IntRange(min = 0, max = 300) int K, @ForAll Layout layout,
                           @ForAll long seed) {
        try (Case c = new Case(seed, layout, M, N, K, DType.FP32, DType.FP32, DType.FP32, seed % 2 == 0,
                seed % 3 == 0)) {
            c.runFast(Parallel.common()); // jqwik properties do not see JUnit's @BeforeAll pools
            c.assertClose("fast");
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(4L * 6 * 5);
            MemorySegment b = arena.allocate(4L * 5 * 7);
            MemorySegment c = arena.allocate(4L * 6 * 7);
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, 6, 7, 5, 1f, a, 4, b, 7, 0f, c, 7, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lda=4").hasMessageContaining("5");
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, 6, 8, 5, 1f, a, 5, b, 8, 0f, c, 8, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("B is 140 bytes");
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, -1, 7, 5, 1f, a, 5, b, 7, 0f, c, 7, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("M=-1");
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, 6, 7, 5, 1f, a, 5, b, 7, 0f, c, 7, arena.allocate(8)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias holds 2 floats, N=7");
            MemorySegment big = arena.allocate(4L * 100);
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, 2, 2, 2, 1f, big, 2, b, 2, 0f, big.asSlice(8), 2, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("C overlaps A");
            assertThatThrownBy(() -> Gemm.gemm(pool1, Layout.NN, 6, 7, 5, 1f, a, DType.FP32, 5, 1f, b, DType.FP32,
                    7, 1f, 0f, c, DType.FP16, 7, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("FP16");
        }
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment a = confined.allocate(16);
            MemorySegment b = confined.allocate(16);
            MemorySegment c = confined.allocate(16);
            assertThatThrownBy(() -> Gemm.gemm(pool2, Layout.NN, 2, 2, 2, 1f, a, DType.FP32, 2, 1f, b, DType.FP32,
                    2, 1f, 0f, c, DType.FP32, 2, null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("A belongs to a confined arena");
            Gemm.gemm(pool1, Layout.NN, 2, 2, 2, 1f, a, DType.FP32, 2, 1f, b, DType.FP32, 2, 1f, 0f, c, DType.FP32,
                    2, null); // one thread: confined memory is fine
        }
        Arena closed = Arena.ofConfined();
        MemorySegment a = closed.allocate(4L * 4);
        closed.close();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment c = arena.allocate(16);
            assertThatThrownBy(() -> Gemm.sgemm(Layout.NN, 2, 2, 2, 1f, a, 2, c, 2, 0f, arena.allocate(16), 2, null))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("A's memory has been freed");
        }
    }
}
