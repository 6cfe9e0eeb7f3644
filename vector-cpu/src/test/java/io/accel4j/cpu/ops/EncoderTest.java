package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.EncoderRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The encoder: the float64 reference's gradients against finite differences (tokens repeated, so the scatter-add
 * sums several rows), the fast kernel against the reference. The forward is one fp32 addition per element: exactly
 * the float64 sum rounded to fp32. The backward adds k contributions to a prefilled fp32 gradient one at a time:
 * within {@code k·u·(|prefill| + Σ|dout|)} (u = 2⁻²⁴, k ≤ B·T) of the float64 sum; and since the contract fixes the
 * order ((b,t) order), it must equal, bit for bit, the fp32 sum taken in that order — which the test also checks.
 */
class EncoderTest {

    static final double U = 0x1p-24;
    /** Float64 finite differences of a linear loss: exact up to the cancellation error (see FiniteDifferences). */
    static final double FD_REL = 1e-7, FD_ABS = 1e-9;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @Test
    void referenceBackwardMatchesFiniteDifferences() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int B = 2, T = 3, C = 4, V = 5;
        int[] inp = {1, 3, 1, 1, 0, 3}; // token 1 three times, token 3 twice, 2 and 4 never
        double[] wte = Buffers.uniform(rnd, V * C, 1);
        double[] wpe = Buffers.uniform(rnd, T * C, 1);
        double[] dout = Buffers.uniform(rnd, B * T * C, 1);
        double[] dwte = new double[V * C], dwpe = new double[T * C];
        EncoderRef.backward(dwte, dwpe, dout, inp, B, T, C);
        double[] out = new double[B * T * C];
        Compare.close("dwte, seed=" + seed, dwte, FiniteDifferences.gradient(wte, w -> {
            EncoderRef.forward(out, inp, w, wpe, B, T, C);
            return FiniteDifferences.dot(dout, out);
        }), FD_REL, FD_ABS);
        Compare.close("dwpe, seed=" + seed, dwpe, FiniteDifferences.gradient(wpe, p -> {
            EncoderRef.forward(out, inp, wte, p, B, T, C);
            return FiniteDifferences.dot(dout, out);
        }), FD_REL, FD_ABS);
    }

    @Test
    void fastMatchesReferenceOnOddShapes() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int[] btv : new int[][] {{1, 1, 1}, {1, 3, 2}, {2, 17, 5}, {3, 7, 50}, {4, 33, 7}}) {
            for (int C : new int[] {1, 3, 7, 33, 768}) {
                check(rnd, btv[0], btv[1], C, btv[2], POOLS.three(), "seed=" + seed);
            }
        }
    }

    static void check(SplittableRandom rnd, int B, int T, int C, int V, Parallel pool, String seed) {
        String what = "B=" + B + " T=" + T + " C=" + C + " V=" + V + " " + seed;
        int[] tokens = Buffers.ints(rnd, B * T, V);
        double[] wte = Buffers.uniform(rnd, V * C, 1), wpe = Buffers.uniform(rnd, T * C, 1);
        double[] dout = Buffers.uniform(rnd, B * T * C, 1);
        double[] dwte0 = Buffers.uniform(rnd, V * C, 1), dwpe0 = Buffers.uniform(rnd, T * C, 1);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.ints(arena, tokens);
            MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
            Encoder.forward(pool, out, inp, Buffers.floats(arena, wte), Buffers.floats(arena, wpe), B, T, C, V);
            double[] want = new double[B * T * C];
            EncoderRef.forward(want, tokens, wte, wpe, B, T, C);
            Compare.close("out " + what, Buffers.read(out, B * T * C), Buffers.roundToFloat(want), 0, 0);

            MemorySegment dwte = Buffers.floats(arena, dwte0), dwpe = Buffers.floats(arena, dwpe0);
            Encoder.backward(pool, dwte, dwpe, Buffers.floats(arena, dout), inp, B, T, C, V);
            double[] wantDwte = dwte0.clone(), wantDwpe = dwpe0.clone();
            EncoderRef.backward(wantDwte, wantDwpe, dout, tokens, B, T, C);
            double[] absDwte = abs(dwte0), absDwpe = abs(dwpe0);
            EncoderRef.backward(absDwte, absDwpe, abs(dout), tokens, B, T, C);
            within("dwte " + what, Buffers.read(dwte, V * C), wantDwte, absDwte, B * T);
            within("dwpe " + what, Buffers.read(dwpe, T * C), wantDwpe, absDwpe, B);
            // the contract's order: contributions added one at a time, in (b,t) order
            float[] fwte = toFloat(dwte0), fwpe = toFloat(dwpe0);
            for (int r = 0; r < B * T; r++) {
                for (int c = 0; c < C; c++) {
                    fwte[tokens[r] * C + c] += (float) dout[r * C + c];
                    fwpe[(r % T) * C + c] += (float) dout[r * C + c];
                }
            }
            assertThat(dwte.mismatch(MemorySegment.ofArray(fwte))).as("dwte in (b,t) order, %s", what).isEqualTo(-1L);
            assertThat(dwpe.mismatch(MemorySegment.ofArray(fwpe))).as("dwpe in (b,t) order, %s", what).isEqualTo(-1L);
        }
    }

    /** |got − want| ≤ (k+1)·u·absSum element-wise: k fp32 additions onto a prefilled value. */
    static void within(String what, double[] got, double[] want, double[] absSum, int k) {
        for (int i = 0; i < got.length; i++) {
            double tol = (k + 1) * U * absSum[i];
            if (!(Math.abs(got[i] - want[i]) <= tol)) {
                Compare.close(what + " [" + i + "]", new double[] {got[i]}, new double[] {want[i]}, 0, tol);
            }
        }
    }

    static double[] abs(double[] x) {
        double[] a = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            a[i] = Math.abs(x[i]);
        }
        return a;
    }

    static float[] toFloat(double[] x) {
        float[] f = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            f[i] = (float) x[i];
        }
        return f;
    }

    @Test
    void resultDoesNotDependOnThreadCount() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int B = 4, T = 64, V = 50; // 256 tokens out of 50: every row of dwte is hit several times
        for (int C : new int[] {768, 771}) {
            int[] tokens = Buffers.ints(rnd, B * T, V);
            try (Arena arena = Arena.ofShared()) {
                MemorySegment inp = Buffers.ints(arena, tokens);
                MemorySegment wte = Buffers.floats(arena, Buffers.uniform(rnd, V * C, 1));
                MemorySegment wpe = Buffers.floats(arena, Buffers.uniform(rnd, T * C, 1));
                MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, B * T * C, 1));
                MemorySegment dwte0 = Buffers.floats(arena, Buffers.uniform(rnd, V * C, 1));
                MemorySegment dwpe0 = Buffers.floats(arena, Buffers.uniform(rnd, T * C, 1));
                MemorySegment[][] got = new MemorySegment[2][];
                Parallel[] pools = {POOLS.one(), POOLS.three()};
                for (int p = 0; p < 2; p++) {
                    MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
                    Encoder.forward(pools[p], out, inp, wte, wpe, B, T, C, V);
                    MemorySegment dwte = arena.allocate(dwte0.byteSize()).copyFrom(dwte0);
                    MemorySegment dwpe = arena.allocate(dwpe0.byteSize()).copyFrom(dwpe0);
                    Encoder.backward(pools[p], dwte, dwpe, dout, inp, B, T, C, V);
                    got[p] = new MemorySegment[] {out, dwte, dwpe};
                }
                String[] names = {"out", "dwte", "dwpe"};
                for (int k = 0; k < 3; k++) {
                    assertThat(got[1][k].mismatch(got[0][k])).as("%s, C=%d, 3 threads vs 1, seed=%d", names[k], C,
                            seed).isEqualTo(-1L);
                }
            }
        }
    }

    @Test
    void badTokensAreNamedWithTheirPosition() {
        int B = 2, T = 3, C = 4, V = 7;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.ints(arena, new int[] {0, 1, 2, 3, 4, 5});
            MemorySegment out = arena.allocate(4L * B * T * C), dout = arena.allocate(4L * B * T * C);
            MemorySegment wte = arena.allocate(4L * V * C), wpe = arena.allocate(4L * T * C);
            inp.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, 5, 7);
            assertThatThrownBy(() -> Encoder.forward(POOLS.one(), out, inp, wte, wpe, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("inp[b=1, t=2] = 7 is not a token id in [0, V=7)");
            inp.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, 5, 5);
            inp.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, 1, -3);
            assertThatThrownBy(() -> Encoder.backward(POOLS.one(), wte, wpe, dout, inp, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp[b=0, t=1] = -3");
        }
    }

    @Test
    void badArgumentsAreNamed() {
        int B = 2, T = 3, C = 4, V = 7;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.ints(arena, new int[] {0, 1, 2, 3, 4, 5});
            MemorySegment out = arena.allocate(4L * B * T * C), dout = arena.allocate(4L * B * T * C);
            MemorySegment wte = arena.allocate(4L * V * C), wpe = arena.allocate(4L * T * C);
            assertThatThrownBy(() -> Encoder.forward(POOLS.one(), out, inp, arena.allocate(4L * 6 * C), wpe, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("wte holds 24 floats, 28 needed");
            assertThatThrownBy(() -> Encoder.forward(POOLS.one(), out, inp.asSlice(4), wte, wpe, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp holds 5 ints, 6 needed");
            assertThatThrownBy(() -> Encoder.forward(POOLS.one(), out, inp, wte, wpe, B, T, 0, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("C must be >= 1, got 0");
            assertThatThrownBy(() -> Encoder.forward(POOLS.one(), wte, inp, wte, wpe, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out overlaps wte");
            assertThatThrownBy(() -> Encoder.backward(POOLS.one(), wte, wpe, wte, inp, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dwte overlaps dout");
            assertThatThrownBy(() -> Encoder.backward(POOLS.one(), wte, wte, dout, inp, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dwte overlaps dwpe");
        }
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment inp = confined.allocate(4L * 6);
            assertThatThrownBy(() -> Encoder.backward(POOLS.three(), confined.allocate(4L * V * C),
                    confined.allocate(4L * T * C), confined.allocate(4L * B * T * C), inp, B, T, C, V))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("dwte belongs to a confined arena");
        }
    }
}
