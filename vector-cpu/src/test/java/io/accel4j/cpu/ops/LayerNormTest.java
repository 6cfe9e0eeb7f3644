package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.ops.LayerNormOps;
import io.accel4j.cpu.ref.LayerNormRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * LayerNorm: the float64 reference's three gradients against finite differences; the fast kernel against the
 * reference, every output element within a bound derived from its fp32 arithmetic (u = 2⁻²⁴, any summation order of
 * n terms errs by at most (n−1)·u·Σ|terms|):
 * <ul>
 * <li>mean: the first pass's m̃ errs by δ₀ ≤ (C+2)·u·mean|x|; the corrected mean by
 *     δm ≤ 2u·|mean| + (C+2)·u·(mean|x − mean| + δ₀);
 * <li>rstd, relatively: half the variance's, ε_s ≤ ½·(C+4)·u·(var + δ₀²)/(var + ε) + 3u;
 * <li>out: {@code |w|·(rstd·δm + |x̂|·(2u + ε_s)) + u·|out|};
 * <li>backward (fed the kernel's own mean and rstd): dinp within
 *     {@code (C+8)·u·rstd·(|g| + mean|g| + |x̂|·(|mean(g·x̂)| + mean|g·x̂|)) + u·|dinp|}; dweight within
 *     {@code (N+4)·u·Σ|dout·x̂| + u·|dweight|}; dbias within {@code (N+1)·u·Σ|dout| + u·|dbias|}.
 * </ul>
 * These are first-order bounds, and tight (errors reach 0.9 of them): each is allowed {@link #SAFETY} times over
 * for the second-order terms. A wrong formula or a skipped element errs by O(1) of these quantities, far above.
 */
class LayerNormTest {

    static final double U = 0x1p-24;
    /** Float64 finite differences against the analytic float64 gradient (see {@link FiniteDifferences}). */
    static final double FD_REL = 1e-6, FD_ABS = 1e-8;
    /** The least row variance the finite-difference check uses ({@link #wellSpreadRows}): rstd ≤ ~3. */
    static final double FD_MIN_VARIANCE = 0.1;
    /** Multiplies every first-order bound (class comment). */
    static final double SAFETY = 2;
    static final int[] NS = {1, 3, 17, 130};
    static final int[] CS = {1, 3, 7, 33, 768};

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** N rows of C values, each row shifted by its own offset in [−offset, offset]. */
    static double[] rows(SplittableRandom rnd, int N, int C, double offset, double spread) {
        double[] x = new double[N * C];
        for (int i = 0; i < N; i++) {
            double o = (rnd.nextDouble() * 2 - 1) * offset;
            for (int c = 0; c < C; c++) {
                x[i * C + c] = (float) (o + (rnd.nextDouble() * 2 - 1) * spread);
            }
        }
        return x;
    }

    @Test
    void referenceBackwardMatchesFiniteDifferences() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int[] nc : new int[][] {{3, 7}, {1, 5}, {2, 1}, {4, 2}}) {
            int N = nc[0], C = nc[1];
            String what = "N=" + N + " C=" + C + " seed=" + seed;
            double[] x = wellSpreadRows(rnd, N, C);
            double[] w = Buffers.uniform(rnd, C, 1.5);
            double[] b = Buffers.uniform(rnd, C, 1);
            double[] dout = Buffers.uniform(rnd, N * C, 1);
            double[] out = new double[N * C], mean = new double[N], rstd = new double[N];
            LayerNormRef.forward(out, mean, rstd, x, w, b, N, C);
            double[] dx = new double[N * C], dw = new double[C], db = new double[C];
            LayerNormRef.backward(dx, dw, db, dout, x, w, mean, rstd, N, C);
            Compare.close("dinp " + what, dx, FiniteDifferences.gradient(x, v -> loss(dout, v, w, b, N, C)),
                    FD_REL, FD_ABS);
            Compare.close("dweight " + what, dw, FiniteDifferences.gradient(w, v -> loss(dout, x, v, b, N, C)),
                    FD_REL, FD_ABS);
            Compare.close("dbias " + what, db, FiniteDifferences.gradient(b, v -> loss(dout, x, w, v, N, C)),
                    FD_REL, FD_ABS);
        }
    }

    /**
     * {@link #rows} whose rows (of C ≥ 2) have a variance of at least {@link #FD_MIN_VARIANCE}. Finite differences
     * err by ~h²·f''' and f''' grows like rstd³: a row of two nearly equal values (seen: C = 2, variance ~1e-3, an
     * exact gradient of −92) puts the central difference itself 1e-4 off. The analytic gradient is not the issue.
     */
    static double[] wellSpreadRows(SplittableRandom rnd, int N, int C) {
        while (true) {
            double[] x = rows(rnd, N, C, 1, 1);
            boolean ok = true;
            for (int i = 0; i < N && C >= 2; i++) {
                double m = 0, v = 0;
                for (int c = 0; c < C; c++) {
                    m += x[i * C + c] / C;
                }
                for (int c = 0; c < C; c++) {
                    v += (x[i * C + c] - m) * (x[i * C + c] - m) / C;
                }
                ok &= v >= FD_MIN_VARIANCE;
            }
            if (ok) {
                return x;
            }
        }
    }

    static double loss(double[] dout, double[] x, double[] w, double[] b, int N, int C) {
        double[] out = new double[N * C];
        LayerNormRef.forward(out, new double[N], new double[N], x, w, b, N, C);
        return FiniteDifferences.dot(dout, out);
    }

    @Test
    void fastMatchesReferenceOnOddShapes() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int N : NS) {
            for (int C : CS) {
                check(rnd, N, C, 5, 1, "seed=" + seed);
            }
        }
    }

    @Test
    void largeMeanSmallSpread() {
        long seed = System.nanoTime();
        check(new SplittableRandom(seed), 37, 768, 1000, 0.05, "seed=" + seed);
    }

    /** Forward (outputs poisoned) and backward (gradients prefilled) against the reference, within the bounds. */
    static void check(SplittableRandom rnd, int N, int C, double offset, double spread, String seed) {
        String what = "N=" + N + " C=" + C + " " + seed;
        double[] x = rows(rnd, N, C, offset, spread);
        double[] w = Buffers.uniform(rnd, C, 1.5);
        double[] b = Buffers.uniform(rnd, C, 1);
        double[] dout = Buffers.uniform(rnd, N * C, 1);
        double[] dx0 = Buffers.uniform(rnd, N * C, 1), dw0 = Buffers.uniform(rnd, C, 1);
        double[] db0 = Buffers.uniform(rnd, C, 1);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.floats(arena, x), weight = Buffers.floats(arena, w);
            MemorySegment out = Buffers.poisoned(arena, (long) N * C);
            MemorySegment mean = Buffers.poisoned(arena, N), rstd = Buffers.poisoned(arena, N);
            LayerNorm.forward(POOLS.three(), out, mean, rstd, inp, weight, Buffers.floats(arena, b), N, C);
            double[] wantOut = new double[N * C], wantMean = new double[N], wantRstd = new double[N];
            LayerNormRef.forward(wantOut, wantMean, wantRstd, x, w, b, N, C);
            double[] tolOut = new double[N * C], tolMean = new double[N], tolRstd = new double[N];
            for (int i = 0; i < N; i++) {
                double m = wantMean[i], s = wantRstd[i], absX = 0, absD = 0;
                for (int c = 0; c < C; c++) {
                    absX += Math.abs(x[i * C + c]) / C;
                    absD += Math.abs(x[i * C + c] - m) / C;
                }
                double var = 1 / (s * s) - LayerNormOps.EPS;
                double d0 = (C + 2) * U * absX;
                double dm = 2 * U * Math.abs(m) + (C + 2) * U * (absD + d0);
                double es = 0.5 * (C + 4) * U * (var + d0 * d0) / (var + LayerNormOps.EPS) + 3 * U;
                tolMean[i] = dm;
                tolRstd[i] = es * s;
                for (int c = 0; c < C; c++) {
                    double xhat = (x[i * C + c] - m) * s;
                    tolOut[i * C + c] = Math.abs(w[c]) * (s * dm + Math.abs(xhat) * (2 * U + es))
                            + U * Math.abs(wantOut[i * C + c]);
                }
            }
            within("mean " + what, Buffers.read(mean, N), wantMean, tolMean);
            within("rstd " + what, Buffers.read(rstd, N), wantRstd, tolRstd);
            within("out " + what, Buffers.read(out, N * C), wantOut, tolOut);

            // backward, from the kernel's own mean and rstd
            double[] m = Buffers.read(mean, N), s = Buffers.read(rstd, N);
            MemorySegment dinp = Buffers.floats(arena, dx0), dweight = Buffers.floats(arena, dw0);
            MemorySegment dbias = Buffers.floats(arena, db0);
            LayerNorm.backward(POOLS.three(), dinp, dweight, dbias, Buffers.floats(arena, dout), inp, weight, mean, rstd,
                    N, C);
            double[] wantDx = dx0.clone(), wantDw = dw0.clone(), wantDb = db0.clone();
            LayerNormRef.backward(wantDx, wantDw, wantDb, dout, x, w, m, s, N, C);
            double[] tolDx = new double[N * C], tolDw = new double[C], tolDb = new double[C];
            for (int i = 0; i < N; i++) {
                double gAbs = 0, gx = 0, gxAbs = 0;
                for (int c = 0; c < C; c++) {
                    double g = dout[i * C + c] * w[c], xhat = (x[i * C + c] - m[i]) * s[i];
                    gAbs += Math.abs(g) / C;
                    gx += g * xhat / C;
                    gxAbs += Math.abs(g * xhat) / C;
                    tolDw[c] += Math.abs(dout[i * C + c] * xhat);
                    tolDb[c] += Math.abs(dout[i * C + c]);
                }
                for (int c = 0; c < C; c++) {
                    double g = dout[i * C + c] * w[c], xhat = (x[i * C + c] - m[i]) * s[i];
                    tolDx[i * C + c] = (C + 8) * U * s[i] * (Math.abs(g) + gAbs + Math.abs(xhat) * (Math.abs(gx)
                            + gxAbs)) + U * Math.abs(wantDx[i * C + c]);
                }
            }
            for (int c = 0; c < C; c++) {
                tolDw[c] = (N + 4) * U * tolDw[c] + U * Math.abs(wantDw[c]);
                tolDb[c] = (N + 1) * U * tolDb[c] + U * Math.abs(wantDb[c]);
            }
            within("dinp " + what, Buffers.read(dinp, N * C), wantDx, tolDx);
            within("dweight " + what, Buffers.read(dweight, C), wantDw, tolDw);
            within("dbias " + what, Buffers.read(dbias, C), wantDb, tolDb);
        }
    }

    /** |got − want| ≤ SAFETY·tol element-wise (NaN fails), reporting the first element outside. */
    static void within(String what, double[] got, double[] want, double[] tol) {
        for (int i = 0; i < got.length; i++) {
            double t = SAFETY * tol[i] + Double.MIN_VALUE;
            if (!(Math.abs(got[i] - want[i]) <= t)) {
                Compare.close(what + " [" + i + "]", new double[] {got[i]}, new double[] {want[i]}, 0, t);
            }
        }
    }

    @Test
    void resultDoesNotDependOnThreadCount() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int N = 257, C = 301; // 5 row chunks, above the parallel threshold; C not a multiple of any vector length
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.floats(arena, rows(rnd, N, C, 2, 1));
            MemorySegment weight = Buffers.floats(arena, Buffers.uniform(rnd, C, 1.5));
            MemorySegment bias = Buffers.floats(arena, Buffers.uniform(rnd, C, 1));
            MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, N * C, 1));
            MemorySegment dinp0 = Buffers.floats(arena, Buffers.uniform(rnd, N * C, 1));
            MemorySegment[][] got = new MemorySegment[2][];
            Parallel[] pools = {POOLS.one(), POOLS.three()};
            for (int p = 0; p < 2; p++) {
                MemorySegment out = Buffers.poisoned(arena, (long) N * C);
                MemorySegment mean = Buffers.poisoned(arena, N), rstd = Buffers.poisoned(arena, N);
                LayerNorm.forward(pools[p], out, mean, rstd, inp, weight, bias, N, C);
                MemorySegment dinp = arena.allocate(dinp0.byteSize()).copyFrom(dinp0);
                MemorySegment dweight = arena.allocate(4L * C), dbias = arena.allocate(4L * C);
                LayerNorm.backward(pools[p], dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
                got[p] = new MemorySegment[] {out, mean, rstd, dinp, dweight, dbias};
            }
            String[] names = {"out", "mean", "rstd", "dinp", "dweight", "dbias"};
            for (int k = 0; k < names.length; k++) {
                assertThat(got[1][k].mismatch(got[0][k])).as("%s, 3 threads vs 1, seed=%d", names[k], seed)
                        .isEqualTo(-1L);
            }
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            int N = 4, C = 5;
            MemorySegment x = arena.allocate(4L * N * C), out = arena.allocate(4L * N * C);
            MemorySegment mean = arena.allocate(4L * N), rstd = arena.allocate(4L * N);
            MemorySegment w = arena.allocate(4L * C), b = arena.allocate(4L * C);
            assertThatThrownBy(() -> LayerNorm.forward(POOLS.one(), out, mean, rstd, x, w, arena.allocate(16), N, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias holds 4 floats, 5 needed");
            assertThatThrownBy(() -> LayerNorm.forward(POOLS.one(), out, mean, rstd, x, w, b, 0, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("N must be >= 1, got 0");
            assertThatThrownBy(() -> LayerNorm.forward(POOLS.one(), x, mean, rstd, x, w, b, N, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out overlaps inp");
            assertThatThrownBy(() -> LayerNorm.forward(POOLS.one(), out, mean, mean, x, w, b, N, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mean overlaps rstd");
            assertThatThrownBy(() -> LayerNorm.backward(POOLS.one(), out, w, b, x, x, w, mean, rstd, N, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dweight overlaps weight");
            assertThatThrownBy(() -> LayerNorm.backward(POOLS.one(), out, w, b, x, x, arena.allocate(4L * C), mean,
                    arena.allocate(12), N, C))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rstd holds 3 floats, 4 needed");
        }
    }
}
