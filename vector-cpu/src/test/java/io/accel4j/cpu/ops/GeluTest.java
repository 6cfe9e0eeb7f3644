package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.ref.GeluRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * GELU: the float64 reference's derivative against finite differences, the fast kernel against the reference.
 *
 * <p>Tolerances: the kernel's t(x) is within 5.7·2⁻²⁴ of tanh u(x), rounding of u included (checked on every fp32
 * x), so {@code |δt| ≤ T_ERR·u} (u = 2⁻²⁴). The forward {@code 0.5·x·(1 + t)} turns that into
 * {@code 0.5·|x|·T_ERR·u}, plus a few roundings of the result; as x → −∞ the result is tiny and only that absolute
 * term holds. The backward's {@code 0.5·(1+t) + F·(1 − t²)}, {@code F = 0.5·x·√(2/π)·(1 + 3·0.044715·x²)}, is off
 * by {@code 0.5·T_ERR·u + |F|·(2·T_ERR + 4)·u}, times |dout|, plus the rounding of the accumulated result; beyond
 * |x| = 6 the kernel's gradient is exactly 1 or 0 and the true one within 1e-9 of it, so F drops out there.
 */
class GeluTest {

    static final double U = 0x1p-24;
    /** Allowed error of tanh u(x), in units of 2⁻²⁴ (5.7 measured, class comment). */
    static final double T_ERR = 8;
    /** Float64 finite differences against the analytic float64 gradient (see {@link FiniteDifferences}). */
    static final double FD_REL = 1e-6, FD_ABS = 1e-8;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** Values where GELU is interesting: around 0, the bend, the saturation of tanh both ways, beyond it. */
    static final double[] SPECIAL = {0, 1e-30, -1e-30, 1e-6, -1e-6, 1e-3, -1e-3, 0.5, -0.5, 1, -1, 2, -2, 3, -3,
        4.5, -4.5, 5, -5, Gelu.X0, -Gelu.X0, 5.2, -5.2, 6, -6, 8, -8, 10, -10, 20, -20, 100, -100, 1e20, -1e20, 1e-40};

    /** n fp32 values: SPECIAL first, then uniform in [−range, range). */
    static double[] inputs(SplittableRandom rnd, int n, double range) {
        double[] x = Buffers.uniform(rnd, n, range);
        for (int i = 0; i < Math.min(n, SPECIAL.length); i++) {
            x[i] = (float) SPECIAL[(i + rnd.nextInt(SPECIAL.length)) % SPECIAL.length];
        }
        return x;
    }

    @Test
    void referenceBackwardMatchesFiniteDifferences() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] special = Arrays.stream(SPECIAL).filter(v -> Math.abs(v) <= 100).toArray(); // x ± h ≠ x
        int n = special.length + 20;
        double[] x = Buffers.uniform(rnd, n, 6);
        System.arraycopy(special, 0, x, 0, special.length);
        double[] dout = Buffers.uniform(rnd, n, 1);
        double[] analytic = new double[n];
        GeluRef.backward(analytic, x, dout, n);
        double[] numeric = FiniteDifferences.gradient(x, xs -> {
            double[] out = new double[n];
            GeluRef.forward(out, xs, n);
            return FiniteDifferences.dot(dout, out);
        });
        Compare.close("d gelu / d inp, seed=" + seed, analytic, numeric, FD_REL, FD_ABS);
    }

    @Test
    void forwardMatchesReference() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int n : new int[] {1, 3, 7, 17, 33, 130, 1000, Tasks.CHUNK + 7, 70_001}) {
            double[] x = inputs(rnd, n, 8);
            double[] want = new double[n];
            GeluRef.forward(want, x, n);
            try (Arena arena = Arena.ofShared()) {
                MemorySegment inp = Buffers.floats(arena, x);
                MemorySegment out = Buffers.poisoned(arena, n);
                Gelu.forward(POOLS.three(), out, inp, n);
                assertForward("forward n=" + n + " seed=" + seed, Buffers.read(out, n), want, x);
                Gelu.forward(POOLS.three(), inp, inp, n); // in place
                assertThat(inp.mismatch(out)).as("in place vs out of place, n=%d seed=%d", n, seed).isEqualTo(-1L);
            }
        }
    }

    static void assertForward(String what, double[] got, double[] want, double[] x) {
        for (int i = 0; i < x.length; i++) {
            double tol = 4 * U * Math.abs(want[i]) + 0.5 * Math.abs(x[i]) * T_ERR * U + Double.MIN_VALUE;
            if (!(Math.abs(got[i] - want[i]) <= tol)) {
                Compare.close(what + " at x=" + x[i], new double[] {got[i]}, new double[] {want[i]}, 0, tol);
            }
        }
    }

    @Test
    void backwardAccumulatesAndMatchesReference() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int n : new int[] {1, 3, 7, 17, 33, 130, 1000, Tasks.CHUNK + 7, 70_001}) {
            double[] x = inputs(rnd, n, 8);
            double[] dout = Buffers.uniform(rnd, n, 1);
            double[] prefill = Buffers.uniform(rnd, n, 1);
            double[] want = prefill.clone();
            GeluRef.backward(want, x, dout, n);
            try (Arena arena = Arena.ofShared()) {
                MemorySegment dinp = Buffers.floats(arena, prefill);
                Gelu.backward(POOLS.three(), dinp, Buffers.floats(arena, x), Buffers.floats(arena, dout), n);
                double[] got = Buffers.read(dinp, n);
                for (int i = 0; i < n; i++) {
                    double xi = x[i];
                    double f = Math.abs(xi) >= 6 ? 0 : Math.abs(0.5 * xi * GeluRef.K * (1 + 3 * GeluRef.A * xi * xi));
                    double tol = 2 * U * Math.abs(want[i])
                            + Math.abs(dout[i]) * U * (0.5 * T_ERR + (2 * T_ERR + 4) * f) + Double.MIN_VALUE;
                    if (!(Math.abs(got[i] - want[i]) <= tol)) {
                        Compare.close("backward n=" + n + " seed=" + seed + " at x=" + xi + " dout=" + dout[i],
                                new double[] {got[i]}, new double[] {want[i]}, 0, tol);
                    }
                }
            }
        }
    }

    @Test
    void resultDoesNotDependOnThreadCount() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int n = 70_001; // 5 chunks, above the parallel threshold
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.floats(arena, inputs(rnd, n, 8));
            MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            MemorySegment prefill = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            MemorySegment[] out = new MemorySegment[2];
            MemorySegment[] dinp = new MemorySegment[2];
            Parallel[] pools = {POOLS.one(), POOLS.three()};
            for (int p = 0; p < 2; p++) {
                out[p] = Buffers.poisoned(arena, n);
                Gelu.forward(pools[p], out[p], inp, n);
                dinp[p] = arena.allocate(prefill.byteSize()).copyFrom(prefill);
                Gelu.backward(pools[p], dinp[p], inp, dout, n);
            }
            assertThat(out[1].mismatch(out[0])).as("forward, 3 threads vs 1, seed=%d", seed).isEqualTo(-1L);
            assertThat(dinp[1].mismatch(dinp[0])).as("backward, 3 threads vs 1, seed=%d", seed).isEqualTo(-1L);
        }
    }

    @Test
    void anElementGetsTheSameBitsInAVectorLaneAndInTheScalarTail() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int n = 61;
        double[] x = inputs(rnd, n + 5, 8);
        double[] dout = Buffers.uniform(rnd, n + 5, 1);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.floats(arena, x);
            MemorySegment g = Buffers.floats(arena, dout);
            for (int shift = 1; shift <= 5; shift++) { // element i sits at position i and at i − shift
                long off = 4L * shift;
                MemorySegment out = Buffers.poisoned(arena, n + 5);
                MemorySegment outShifted = Buffers.poisoned(arena, n + 5);
                Gelu.forward(POOLS.one(), out, inp, n + 5);
                Gelu.forward(POOLS.one(), outShifted.asSlice(off), inp.asSlice(off), n + 5 - shift);
                assertThat(out.asSlice(off).mismatch(outShifted.asSlice(off)))
                        .as("forward, shift %d, seed=%d", shift, seed).isEqualTo(-1L);
                MemorySegment dinp = arena.allocate(4L * (n + 5));
                MemorySegment dinpShifted = arena.allocate(4L * (n + 5));
                Gelu.backward(POOLS.one(), dinp, inp, g, n + 5);
                Gelu.backward(POOLS.one(), dinpShifted.asSlice(off), inp.asSlice(off), g.asSlice(off), n + 5 - shift);
                assertThat(dinp.asSlice(off).mismatch(dinpShifted.asSlice(off)))
                        .as("backward, shift %d, seed=%d", shift, seed).isEqualTo(-1L);
            }
        }
    }

    @Test
    void nanPropagates() {
        try (Arena arena = Arena.ofShared()) {
            int n = 19; // vector lanes and the scalar tail
            MemorySegment inp = Buffers.poisoned(arena, n);
            MemorySegment out = arena.allocate(4L * n);
            MemorySegment dinp = arena.allocate(4L * n);
            Gelu.forward(POOLS.one(), out, inp, n);
            Gelu.backward(POOLS.one(), dinp, inp, Buffers.floats(arena, new double[n]), n);
            for (int i = 0; i < n; i++) {
                assertThat(out.getAtIndex(ValueLayout.JAVA_FLOAT, i)).as("gelu(NaN) [%d]", i).isNaN();
                assertThat(dinp.getAtIndex(ValueLayout.JAVA_FLOAT, i)).as("gelu'(NaN) [%d]", i)
                        .isNaN();
            }
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(4L * 10);
            MemorySegment b = arena.allocate(4L * 10);
            MemorySegment c = arena.allocate(4L * 10);
            assertThatThrownBy(() -> Gelu.forward(POOLS.one(), a, arena.allocate(12), 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp holds 3 floats, 4 needed");
            assertThatThrownBy(() -> Gelu.forward(POOLS.one(), a, b, -1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be >= 0, got -1");
            assertThatThrownBy(() -> Gelu.forward(POOLS.one(), a.asSlice(4), a, 5))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out partly overlaps inp");
            assertThatThrownBy(() -> Gelu.backward(POOLS.one(), a, b, a, 5))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp overlaps dout");
            assertThatThrownBy(() -> Gelu.backward(POOLS.one(), a, c, b, 11))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp holds 10 floats");
            Gelu.forward(POOLS.one(), a, b, 0); // nothing to do
            Gelu.backward(POOLS.one(), a, b, c, 0);
        }
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment a = confined.allocate(16);
            MemorySegment b = confined.allocate(16);
            assertThatThrownBy(() -> Gelu.forward(POOLS.three(), a, b, 4))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("out belongs to a confined arena");
            Gelu.forward(POOLS.one(), a, b, 4); // one thread: confined memory is fine
        }
    }
}
