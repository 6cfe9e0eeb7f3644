package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.ref.ResidualRef;
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
 * The residual add: the float64 reference's gradients against finite differences, the fast kernel against the
 * reference. Each fast output is one fp32 addition of fp32 values, so it is the exact sum rounded once: within
 * {@code u·|sum|} (u = 2⁻²⁴) of the float64 reference — in fact equal to it rounded to fp32, which is what we check.
 */
class ResidualTest {

    /** Float64 finite differences of a linear loss: exact up to the cancellation error (see FiniteDifferences). */
    static final double FD_REL = 1e-7, FD_ABS = 1e-9;
    static final int[] SIZES = {1, 3, 7, 17, 33, 130, 1000, Tasks.CHUNK + 7, 70_001};

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @Test
    void referenceBackwardMatchesFiniteDifferences() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int n = 13;
        double[] a = Buffers.uniform(rnd, n, 2);
        double[] b = Buffers.uniform(rnd, n, 2);
        double[] dout = Buffers.uniform(rnd, n, 1);
        double[] da = new double[n];
        double[] db = new double[n];
        ResidualRef.backward(da, db, dout, n);
        double[] out = new double[n];
        Compare.close("dinp1, seed=" + seed, da, FiniteDifferences.gradient(a, x -> {
            ResidualRef.forward(out, x, b, n);
            return FiniteDifferences.dot(dout, out);
        }), FD_REL, FD_ABS);
        Compare.close("dinp2, seed=" + seed, db, FiniteDifferences.gradient(b, x -> {
            ResidualRef.forward(out, a, x, n);
            return FiniteDifferences.dot(dout, out);
        }), FD_REL, FD_ABS);
    }

    @Test
    void forwardAndBackwardMatchReferenceRoundedToFp32() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int n : SIZES) {
            double[] a = Buffers.uniform(rnd, n, 3);
            double[] b = Buffers.uniform(rnd, n, 3);
            double[] dout = Buffers.uniform(rnd, n, 1);
            double[] want = new double[n];
            ResidualRef.forward(want, a, b, n);
            double[] da = Buffers.uniform(rnd, n, 1);
            double[] db = Buffers.uniform(rnd, n, 1);
            double[] wantDa = da.clone();
            double[] wantDb = db.clone();
            ResidualRef.backward(wantDa, wantDb, dout, n);
            try (Arena arena = Arena.ofShared()) {
                MemorySegment inp1 = Buffers.floats(arena, a);
                MemorySegment inp2 = Buffers.floats(arena, b);
                MemorySegment out = Buffers.poisoned(arena, n);
                Residual.forward(POOLS.three(), out, inp1, inp2, n);
                Compare.close("forward n=" + n + " seed=" + seed, Buffers.read(out, n), Buffers.roundToFloat(want),
                        0, 0);
                MemorySegment dinp1 = Buffers.floats(arena, da);
                MemorySegment dinp2 = Buffers.floats(arena, db);
                Residual.backward(POOLS.three(), dinp1, dinp2, Buffers.floats(arena, dout), n);
                Compare.close("dinp1 n=" + n + " seed=" + seed, Buffers.read(dinp1, n), Buffers.roundToFloat(wantDa),
                        0, 0);
                Compare.close("dinp2 n=" + n + " seed=" + seed, Buffers.read(dinp2, n), Buffers.roundToFloat(wantDb),
                        0, 0);
                Residual.forward(POOLS.three(), inp1, inp1, inp2, n); // in place, either input
                assertThat(inp1.mismatch(out)).as("out = inp1, n=%d seed=%d", n, seed).isEqualTo(-1L);
                inp1 = Buffers.floats(arena, a);
                Residual.forward(POOLS.three(), inp2, inp1, inp2, n);
                assertThat(inp2.mismatch(out)).as("out = inp2, n=%d seed=%d", n, seed).isEqualTo(-1L);
            }
        }
    }

    @Test
    void resultDoesNotDependOnThreadCount() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int n = 70_001; // 5 chunks, above the parallel threshold
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = Buffers.floats(arena, Buffers.uniform(rnd, n, 3));
            MemorySegment b = Buffers.floats(arena, Buffers.uniform(rnd, n, 3));
            MemorySegment prefill = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            MemorySegment[][] got = new MemorySegment[2][];
            Parallel[] pools = {POOLS.one(), POOLS.three()};
            for (int p = 0; p < 2; p++) {
                MemorySegment out = Buffers.poisoned(arena, n);
                Residual.forward(pools[p], out, a, b, n);
                MemorySegment d1 = arena.allocate(prefill.byteSize()).copyFrom(prefill);
                MemorySegment d2 = arena.allocate(prefill.byteSize()).copyFrom(prefill);
                Residual.backward(pools[p], d1, d2, out, n);
                got[p] = new MemorySegment[] {out, d1, d2};
            }
            for (int k = 0; k < 3; k++) {
                assertThat(got[1][k].mismatch(got[0][k])).as("output %d, 3 threads vs 1, seed=%d", k, seed)
                        .isEqualTo(-1L);
            }
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(4L * 10);
            MemorySegment b = arena.allocate(4L * 10);
            MemorySegment c = arena.allocate(4L * 10);
            assertThatThrownBy(() -> Residual.forward(POOLS.one(), a, b, arena.allocate(12), 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp2 holds 3 floats, 4 needed");
            assertThatThrownBy(() -> Residual.forward(POOLS.one(), a, b, c, -2))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be >= 0, got -2");
            assertThatThrownBy(() -> Residual.forward(POOLS.one(), a, a.asSlice(8), c, 5))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out partly overlaps inp1");
            assertThatThrownBy(() -> Residual.backward(POOLS.one(), a, b, b, 5))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp2 overlaps dout");
            assertThatThrownBy(() -> Residual.backward(POOLS.one(), a, a, c, 5))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp1 overlaps dinp2");
            assertThatThrownBy(() -> Residual.backward(POOLS.one(), a, b, c, 11))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp1 holds 10 floats");
        }
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment a = confined.allocate(16);
            assertThatThrownBy(() -> Residual.backward(POOLS.three(), a, confined.allocate(16), confined.allocate(16), 4))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("dinp1 belongs to a confined arena");
        }
    }
}
