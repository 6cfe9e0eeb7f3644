package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.ops.LayerNormOps;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.LongToDoubleFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The training step's element-wise, normalisation and reduction kernels (layernorm.cu, gelu.cu, residual.cu,
 * encoder.cu, classifier.cu, matmul.cu's dbias, norm.cu: the very sources, run on the CPU by {@code
 * src/test/cuda/kernels_emu.cpp} through {@code cuda_emu.h}) against {@link CpuOps}, each launched with the grid,
 * block and arguments {@link GpuOps} (and {@link GpuMatmul}) use, taken from their constants. Odd sizes, outputs
 * poisoned (NaN) where a kernel writes, pre-filled with the same random values on both sides where it adds. This
 * checks indexing, boundaries and the block reductions without a GPU; the family tests ({@link PointwiseGpuTest},
 * {@link LayerNormGpuTest}, …) run them on one. Skipped without g++.
 */
class GpuKernelsEmuTest {

    private static final long SEED = 20261203L;

    /** Where the kernel does the CPU's fp32 operations in the CPU's order: the same bits. */
    private static final double EXACT = 0;
    /**
     * Sums in another order than the CPU's (per-thread strides then warp butterflies, row phases, the CPU's vector
     * lanes and chunks): each term passes through at most ~40 roundings on either side (≤ 7 strided terms and 5
     * butterfly levels; ≤ 37 rows; C/lanes + lanes on the CPU), so |Δ| ≤ 40·2⁻²⁴·Σ|terms| ≈ 2.4e-6·Σ|terms|, the
     * scale each check passes; with room for the GPU's rsqrtf (2 ulp) and the CPU's fma.
     */
    private static final double SUM_TOL = 4e-6;
    /**
     * GELU: the GPU's tanhf (2 ulp; glibc's here) against the CPU's rational tanh (within 5.7·2⁻²⁴ of tanh), an
     * absolute error of ~8·2⁻²⁴ in t, scaled by 0.5·|x| (forward) or by the derivative's x-polynomial (backward),
     * plus a few roundings: relative to the scale each check passes.
     */
    private static final double GELU_TOL = 1e-6;
    /**
     * Classifier: S = Σ exp, positive terms, each through ≤ 12 roundings on the GPU (2 strided terms, two 5-level
     * butterflies) and ≤ 34 on the CPU (256/lanes + 2, Cephes' expf ≤ 1 ulp; the GPU's expf 2 ulp): S and so
     * exp/S within ~50·2⁻²⁴ ≈ 3e-6 relative, log S within that absolutely; the GPU's loss in fp32, the CPU's in float64.
     */
    private static final double CLASSIFIER_TOL = 1e-5;
    /** sum_of_squares in float64 against the CPU's fp32 lanes of ≤ 35 fused multiply-adds each (Reductions). */
    private static final double SQUARES_TOL = 36 * 0x1p-24;

    @TempDir
    static Path tmp;
    private static Path exe;
    private static Parallel pool;
    private static CpuOps cpu;
    private final Arena arena = Arena.ofConfined();
    private final SplittableRandom random = new SplittableRandom(SEED);

    @BeforeAll
    static void compile() throws Exception {
        exe = Emulator.compile(tmp, "kernels_emu", "kernels_emu", "-ffp-contract=off");
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        if (pool != null) {
            pool.close();
        }
    }

    @AfterEach
    void free() {
        arena.close();
    }

    // ---- layernorm.cu

    @Test
    void layernormForwardMatchesCpu() throws Exception {
        for (int[] nc : new int[][] {{37, 67}, {9, 200}, {1, 1}}) {
            int N = nc[0], C = nc[1];
            MemorySegment inp = floats(N * C, 3, 7), weight = floats(C, 0.5, 1.5), bias = floats(C, -0.5, 0.5);
            MemorySegment out = nan(N * C), mean = nan(N), rstd = nan(N);
            MemorySegment cOut = nan(N * C), cMean = nan(N), cRstd = nan(N);
            cpu.layernormForward(cOut, cMean, cRstd, inp, weight, bias, N, C);
            launch("layernorm_forward", Dim.of((N + LayerNormGpu.WARP_ROWS - 1) / LayerNormGpu.WARP_ROWS), Dim.of(GpuLaunch.BLOCK),
                    buffers("out", out, "mean", mean, "rstd", rstd, "inp", inp, "weight", weight, "bias", bias),
                    N, C, LayerNormOps.EPS);
            // the mean of values in [3, 7): Σ|x|/C ≈ |mean|; rstd and out to a few roundings of their own size
            // past the mean's and variance's sums (relative to the row's spread, ~1)
            check("layernorm mean", mean, cMean, N, SUM_TOL, i -> Math.abs(cMean.getAtIndex(JAVA_FLOAT, i)));
            check("layernorm rstd", rstd, cRstd, N, SUM_TOL, i -> Math.abs(cRstd.getAtIndex(JAVA_FLOAT, i)));
            check("layernorm out", out, cOut, (long) N * C, SUM_TOL,
                    i -> 1 + Math.abs(cOut.getAtIndex(JAVA_FLOAT, i)));
        }
    }

    @Test
    void layernormBackwardMatchesCpu() throws Exception {
        for (int[] nc : new int[][] {{37, 67}, {9, 200}}) {
            int N = nc[0], C = nc[1];
            MemorySegment inp = floats(N * C, -2, 2), weight = floats(C, 0.5, 1.5), bias = floats(C, -0.5, 0.5);
            MemorySegment dout = floats(N * C, -1, 1), mean = nan(N), rstd = nan(N);
            cpu.layernormForward(nan(N * C), mean, rstd, inp, weight, bias, N, C);
            MemorySegment dinp = floats(N * C, -1, 1), dweight = floats(C, -1, 1), dbias = floats(C, -1, 1);
            MemorySegment cDinp = copy(dinp), cDweight = copy(dweight), cDbias = copy(dbias);
            cpu.layernormBackward(cDinp, cDweight, cDbias, dout, inp, weight, mean, rstd, N, C);
            launch("layernorm_backward_dinp", Dim.of((N + LayerNormGpu.WARP_ROWS - 1) / LayerNormGpu.WARP_ROWS),
                    Dim.of(GpuLaunch.BLOCK), buffers("dinp", dinp, "dout", dout, "inp", inp, "weight", weight,
                            "mean", mean, "rstd", rstd), N, C);
            launch("layernorm_backward_params", Dim.of((C + GpuLaunch.COLUMN_BLOCK - 1) / GpuLaunch.COLUMN_BLOCK),
                    Dim.of(GpuLaunch.COLUMN_BLOCK), buffers("dweight", dweight, "dbias", dbias, "dout", dout,
                            "inp", inp, "mean", mean, "rstd", rstd), N, C);
            // dinp's terms: the previous value, and rstd·(g, mean g, x̂·mean(g·x̂)) with |g|, |x̂| ~ 1
            check("layernorm dinp", dinp, cDinp, (long) N * C, SUM_TOL,
                    i -> 1 + Math.abs(cDinp.getAtIndex(JAVA_FLOAT, i)));
            // the params sum N terms of size ≤ |dout|·|x̂| ≤ 2 into the previous value
            check("layernorm dweight", dweight, cDweight, C, SUM_TOL, i -> 1 + 2 * N);
            check("layernorm dbias", dbias, cDbias, C, SUM_TOL, i -> 1 + N);
        }
    }

    // ---- gelu.cu, residual.cu

    @Test
    void geluMatchesCpu() throws Exception {
        long n = 37 * 67;
        MemorySegment inp = floats(n, -6, 6), dout = floats(n, -1, 1);
        MemorySegment out = nan(n), cOut = nan(n);
        cpu.geluForward(cOut, inp, n);
        launch("gelu_forward", Dim.of(GpuLaunch.blocks(n)), Dim.of(GpuLaunch.BLOCK), buffers("out", out, "inp", inp), n);
        check("gelu out", out, cOut, n, GELU_TOL, i -> Math.abs(inp.getAtIndex(JAVA_FLOAT, i)));

        MemorySegment dinp = floats(n, -1, 1), cDinp = copy(dinp);
        cpu.geluBackward(cDinp, inp, dout, n);
        launch("gelu_backward", Dim.of(GpuLaunch.blocks(n)), Dim.of(GpuLaunch.BLOCK),
                buffers("dinp", dinp, "inp", inp, "dout", dout), n);
        // an error δt in t moves gelu' by δt·(0.5 + x·t·√(2/π)·(1 + 0.134·x²)) ≤ δt·(1 + |x|·(1 + x²/8))
        check("gelu dinp", dinp, cDinp, n, GELU_TOL, i -> {
            double x = Math.abs(inp.getAtIndex(JAVA_FLOAT, i)), d = Math.abs(dout.getAtIndex(JAVA_FLOAT, i));
            return Math.abs(cDinp.getAtIndex(JAVA_FLOAT, i)) + (1 + x * (1 + x * x / 8)) * d;
        });
    }

    @Test
    void residualMatchesCpuBitForBit() throws Exception {
        // the second size has more elements than MAX_BLOCKS blocks have threads: the grid-stride loop goes round
        // again (forward only: each such launch takes seconds in the emulator)
        for (long n : new long[] {37 * 67, (long) GpuLaunch.MAX_BLOCKS * GpuLaunch.BLOCK + 333}) {
            MemorySegment a = floats(n, -1, 1), b = floats(n, -1, 1), dout = floats(n, -1, 1);
            MemorySegment out = nan(n), cOut = nan(n);
            cpu.residualForward(cOut, a, b, n);
            launch("residual_forward", Dim.of(GpuLaunch.blocks(n)), Dim.of(GpuLaunch.BLOCK),
                    buffers("out", out, "inp1", a, "inp2", b), n);
            check("residual out", out, cOut, n, EXACT, i -> 0);
            if (n > GpuLaunch.MAX_BLOCKS * GpuLaunch.BLOCK) {
                continue;
            }
            MemorySegment d1 = floats(n, -1, 1), d2 = floats(n, -1, 1), c1 = copy(d1), c2 = copy(d2);
            cpu.residualBackward(c1, c2, dout, n);
            launch("residual_backward", Dim.of(GpuLaunch.blocks(n)), Dim.of(GpuLaunch.BLOCK),
                    buffers("dinp1", d1, "dinp2", d2, "dout", dout), n);
            check("residual dinp1", d1, c1, n, EXACT, i -> 0);
            check("residual dinp2", d2, c2, n, EXACT, i -> 0);
        }
    }

    // ---- encoder.cu

    @Test
    void encoderMatchesCpuBitForBit() throws Exception {
        for (int[] btcv : new int[][] {{3, 13, 67, 97}, {1, 5, 200, 70}}) {
            int B = btcv[0], T = btcv[1], C = btcv[2], V = btcv[3], BT = B * T;
            MemorySegment inp = tokens(BT, V), wte = floats((long) V * C, -1, 1), wpe = floats((long) T * C, -1, 1);
            MemorySegment out = nan((long) BT * C), cOut = nan((long) BT * C);
            cpu.encoderForward(cOut, inp, wte, wpe, B, T, C, V);
            launch("encoder_forward", Dim.of(GpuLaunch.blocks((long) BT * C)), Dim.of(GpuLaunch.BLOCK),
                    buffers("out", out, "inp", inp, "wte", wte, "wpe", wpe), B, T, C);
            check("encoder out", out, cOut, (long) BT * C, EXACT, i -> 0);

            // both add each token's row in (b,t) order into the previous value, as the CPU does
            MemorySegment dout = floats((long) BT * C, -1, 1);
            MemorySegment dwte = floats((long) V * C, -1, 1), dwpe = floats((long) T * C, -1, 1);
            MemorySegment cDwte = copy(dwte), cDwpe = copy(dwpe);
            cpu.encoderBackward(cDwte, cDwpe, dout, inp, B, T, C, V);
            launch("encoder_backward_wpe", Dim.of(GpuLaunch.blocks((long) T * C)), Dim.of(GpuLaunch.BLOCK),
                    buffers("dwpe", dwpe, "dout", dout), B, T, C);
            launch("encoder_backward_wte",
                    Dim.of((C + GpuLaunch.COLUMN_BLOCK - 1) / GpuLaunch.COLUMN_BLOCK, EncoderGpu.WTE_BUCKETS),
                    Dim.of(GpuLaunch.COLUMN_BLOCK), buffers("dwte", dwte, "dout", dout, "inp", inp), BT, C);
            check("encoder dwpe", dwpe, cDwpe, (long) T * C, EXACT, i -> 0);
            check("encoder dwte", dwte, cDwte, (long) V * C, EXACT, i -> 0);
        }
    }

    // ---- classifier.cu

    @Test
    void classifierMatchesCpu() throws Exception {
        // V below and above the block's 512 threads; padding columns hold NaN, which neither side may read
        for (int[] nvp : new int[][] {{13, 97, 128}, {3, 1000, 1024}}) {
            int N = nvp[0], V = nvp[1], Vp = nvp[2];
            MemorySegment targets = tokens(N, V);
            MemorySegment logits = floats((long) N * Vp, -8, 8);
            for (int i = 0; i < N; i++) {
                for (int j = V; j < Vp; j++) {
                    logits.setAtIndex(JAVA_FLOAT, (long) i * Vp + j, Float.NaN);
                }
            }
            for (boolean backward : new boolean[] {false, true}) {
                float scale = 1f / N;
                MemorySegment x = copy(logits), cX = copy(logits), losses = nan(N), cLosses = nan(N);
                if (backward) {
                    cpu.classifierForwardBackward(cX, cLosses, targets, N, V, Vp, scale);
                } else {
                    cpu.classifierForward(cLosses, cX, targets, N, V, Vp);
                }
                launch("classifier_forward_backward", Dim.of(N), Dim.of(ClassifierGpu.BLOCK),
                        buffers("logits", x, "losses", losses, "targets", targets), N, V, Vp,
                        backward ? scale : 0f, backward ? 1 : 0);
                // the loss log S + M − x[t]: log S's error (absolute) and a few roundings of the loss
                check("classifier losses", losses, cLosses, N, CLASSIFIER_TOL,
                        i -> 1 + Math.abs(cLosses.getAtIndex(JAVA_FLOAT, i)));
                if (backward) {
                    // scale·(p − [j = t]): p to CLASSIFIER_TOL relative; the padding exactly 0 on both sides
                    check("classifier dlogits", x, cX, (long) N * Vp, CLASSIFIER_TOL,
                            i -> Math.abs(cX.getAtIndex(JAVA_FLOAT, i)) + 0x1p-40);
                } else {
                    assertThat(x.mismatch(logits)).as("forward only: logits untouched").isEqualTo(-1L);
                }
            }
        }
    }

    // ---- matmul.cu

    @Test
    void matmulBackwardBiasMatchesCpu() throws Exception {
        for (int[] nc : new int[][] {{37, 200}, {3, 67}, {40, 31}}) {
            int N = nc[0], OC = nc[1], C = 3;
            MemorySegment dout = floats((long) N * OC, -1, 1), dbias = floats(OC, -1, 1), cDbias = copy(dbias);
            cpu.matmulBackward(floats((long) N * C, 0, 0), floats((long) OC * C, 0, 0), cDbias, dout,
                    floats((long) N * C, -1, 1), floats((long) OC * C, -1, 1), N, C, OC, DType.FP32);
            launch("matmul_backward_bias", Dim.of((OC + 31) / 32), GpuMatmul.BIAS_BLOCK,
                    buffers("dbias", dbias, "dout", dout), N, OC);
            // N terms of size ≤ 1 added to the previous value (≤ 1)
            check("dbias", dbias, cDbias, OC, SUM_TOL, i -> 1 + N);
        }
    }

    // ---- norm.cu (the partials combined on the host by GpuOps's own code)

    @Test
    void sumOfSquaresMatchesCpu() throws Exception {
        // (the grid-stride loop's second round, beyond MAX_BLOCKS·BLOCK elements, is residual_forward's test: 1024
        // emulated blocks of warp shuffles take 15 s here)
        for (long n : new long[] {37 * 67, 1, 255, 5 * GpuLaunch.BLOCK}) {
            MemorySegment x = floats(n, -3, 3);
            int grid = GpuLaunch.blocks(n);
            MemorySegment partial = arena.allocate(JAVA_DOUBLE, grid).fill((byte) 0xFF); // NaN
            launch("sum_of_squares", Dim.of(grid), Dim.of(GpuLaunch.BLOCK), buffers("partial", partial, "x", x), n);
            double emulated = ReductionsGpu.sumOfPartials(partial, grid), expected = cpu.sumOfSquares(x, n);
            report("sum_of_squares n=" + n, Math.abs(emulated - expected) / expected);
            assertThat(emulated).as("sum of squares, n %d", n)
                    .isCloseTo(expected, org.assertj.core.data.Offset.offset(SQUARES_TOL * expected));
        }
    }

    @Test
    void amaxAndHasNonFiniteMatchCpu() throws Exception {
        long n = 37 * 67;
        // all finite; then a NaN, +inf, −inf placed first, in the middle, last (the last block's last thread)
        long[] at = {-1, 0, n / 2, n - 1};
        float[] bad = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY};
        for (long pos : at) {
            for (float v : pos < 0 ? new float[] {0f} : bad) {
                MemorySegment x = floats(n, -3, 3);
                if (pos >= 0) {
                    x.setAtIndex(JAVA_FLOAT, pos, v);
                }
                int grid = GpuLaunch.blocks(n);
                MemorySegment partial = arena.allocate(JAVA_FLOAT, grid).fill((byte) 0xBF); // −1.49: no amax
                launch("amax", Dim.of(grid), Dim.of(GpuLaunch.BLOCK), buffers("partial", partial, "x", x), n);
                assertThat(Float.floatToIntBits(ReductionsGpu.maxOfPartials(partial, grid))).as("amax, %s at %d", v, pos)
                        .isEqualTo(Float.floatToIntBits(cpu.amax(x, n)));
                MemorySegment flags = arena.allocate(JAVA_INT, grid).fill((byte) 0x7F); // neither 0 nor 1
                launch("has_non_finite", Dim.of(grid), Dim.of(GpuLaunch.BLOCK), buffers("partial", flags, "x", x), n);
                for (int b = 0; b < grid; b++) {
                    assertThat(flags.getAtIndex(JAVA_INT, b)).as("has_non_finite partial %d", b).isIn(0, 1);
                }
                assertThat(ReductionsGpu.anyPartial(flags, grid)).as("has_non_finite, %s at %d", v, pos)
                        .isEqualTo(cpu.hasNonFinite(x, n)).isEqualTo(pos >= 0);
            }
        }
    }

    /**
     * The kernels with shared memory or block votes, built with ThreadSanitizer, which knows the emulator's barriers:
     * a thread reading what another wrote with no __syncthreads/__syncwarp between them (e.g. the classifier
     * overwriting x[target] before every thread has read it) is reported and the harness exits non-zero. The results
     * are the other tests' business. Skipped where the toolchain has no ThreadSanitizer runtime.
     */
    @Test
    void sharedMemoryAccessesAreSynchronised() throws Exception {
        Path tsan;
        try {
            tsan = Emulator.compile(tmp, "kernels_emu", "kernels_emu_tsan", "-ffp-contract=off", "-g",
                    "-fsanitize=thread");
        } catch (AssertionError e) {
            assumeTrue(false, "g++ -fsanitize=thread failed (no libtsan?): " + e.getMessage());
            return;
        }
        int N = 3, V = 600, Vp = 640;
        launch(tsan, "classifier_forward_backward", Dim.of(N), Dim.of(ClassifierGpu.BLOCK),
                buffers("logits", floats((long) N * Vp, -4, 4), "losses", nan(N), "targets", tokens(N, V)),
                N, V, Vp, 1f / N, 1);
        launch(tsan, "matmul_backward_bias", Dim.of(2), GpuMatmul.BIAS_BLOCK,
                buffers("dbias", floats(40, -1, 1), "dout", floats(13 * 40, -1, 1)), 13, 40);
        long n = 3 * GpuLaunch.BLOCK + 7;
        MemorySegment x = floats(n, -1, 1);
        int grid = GpuLaunch.blocks(n);
        launch(tsan, "sum_of_squares", Dim.of(grid), Dim.of(GpuLaunch.BLOCK),
                buffers("partial", arena.allocate(JAVA_DOUBLE, grid), "x", x), n);
        launch(tsan, "amax", Dim.of(grid), Dim.of(GpuLaunch.BLOCK),
                buffers("partial", arena.allocate(JAVA_FLOAT, grid), "x", x), n);
        launch(tsan, "has_non_finite", Dim.of(grid), Dim.of(GpuLaunch.BLOCK),
                buffers("partial", arena.allocate(JAVA_INT, grid), "x", x), n);
        int rows = 11, C = 45;
        launch(tsan, "layernorm_forward", Dim.of((rows + LayerNormGpu.WARP_ROWS - 1) / LayerNormGpu.WARP_ROWS),
                Dim.of(GpuLaunch.BLOCK), buffers("out", nan(rows * C), "mean", nan(rows), "rstd", nan(rows),
                        "inp", floats(rows * C, -1, 1), "weight", floats(C, -1, 1), "bias", floats(C, -1, 1)),
                rows, C, LayerNormOps.EPS);
    }

    // ---- the harness

    private static void launch(String kernel, Dim grid, Dim block, Map<String, MemorySegment> buffers,
                               Object... scalars) throws Exception {
        Emulator.launch(exe, tmp, kernel, grid, block, buffers, scalars);
    }

    private static void launch(Path exe, String kernel, Dim grid, Dim block, Map<String, MemorySegment> buffers,
                               Object... scalars) throws Exception {
        Emulator.launch(exe, tmp, kernel, grid, block, buffers, scalars);
    }

    private static Map<String, MemorySegment> buffers(Object... nameSegment) {
        return Emulator.buffers(nameSegment);
    }

    /**
     * Every one of the n floats: the same bits when {@code tol} is 0, else |emulated − cpu| ≤ tol·scale(i); NaN only
     * where the CPU has NaN.
     */
    private static void check(String what, MemorySegment emulated, MemorySegment cpuOut, long n, double tol,
                              LongToDoubleFunction scale) {
        double worst = 0;
        for (long i = 0; i < n; i++) {
            float e = emulated.getAtIndex(JAVA_FLOAT, i), c = cpuOut.getAtIndex(JAVA_FLOAT, i);
            if (tol == 0 || Float.isNaN(c)) {
                assertThat(Float.floatToRawIntBits(e)).as("%s[%d]: %s, the CPU's %s", what, i, e, c)
                        .isEqualTo(Float.floatToRawIntBits(c));
                continue;
            }
            double s = scale.applyAsDouble(i), err = Math.abs((double) e - c);
            assertThat(err).as("%s[%d]: %s, the CPU's %s (scale %s)", what, i, e, c, s).isLessThanOrEqualTo(tol * s);
            if (s > 0) {
                worst = Math.max(worst, err / s);
            }
        }
        report(what, worst);
    }

    private static void report(String what, double worst) {
        System.out.printf("%s: max error %.3g (relative to its scale)%n", what, worst);
    }

    private MemorySegment floats(long n, double lo, double hi) {
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, lo == hi ? (float) lo : (float) random.nextDouble(lo, hi));
        }
        return s;
    }

    private MemorySegment nan(long n) {
        return arena.allocate(JAVA_FLOAT, n).fill((byte) 0xFF);
    }

    private MemorySegment copy(MemorySegment s) {
        return arena.allocate(s.byteSize(), 16).copyFrom(s);
    }

    /** n token ids in [0, V), a quarter of them repeating an earlier one (rows that add up in dwte). */
    private MemorySegment tokens(int n, int V) {
        MemorySegment s = arena.allocate(JAVA_INT, n);
        for (int i = 0; i < n; i++) {
            int t = i > 0 && random.nextInt(4) == 0 ? s.getAtIndex(JAVA_INT, random.nextInt(i)) : random.nextInt(V);
            s.setAtIndex(JAVA_INT, i, t);
        }
        return s;
    }
}
