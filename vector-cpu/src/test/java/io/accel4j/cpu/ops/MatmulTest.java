package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.MatmulRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import io.accel4j.cpu.testing.FiniteDifferences;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The linear layer: the float64 reference's backward against finite differences, then the fast layer (GEMM) against
 * the reference with outputs poisoned and gradients pre-filled.
 *
 * <p>Tolerance: each output is a K-term fp32 dot product of values in [−1, 1] (K = C forward, OC for dinp, N for
 * dweight); recursive fp32 summation errs by at most K·u·Σ|terms| ≤ K·u·K (u = 2⁻²⁴), and the pre-filled gradient adds
 * one more rounding of its own size. {@code ABS = 2·K²·u} covers both with room; it is 4e-3 at K=257, far below the
 * size of an indexing mistake (a whole term, ~0.3 on average).
 */
class MatmulTest {

    static final double U = 0x1p-24;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    @Test
    void referenceBackwardMatchesFiniteDifferences() {
        SplittableRandom rnd = new SplittableRandom(11);
        int N = 3, C = 5, OC = 4;
        double[] inp = Buffers.uniform(rnd, N * C, 1);
        double[] w = Buffers.uniform(rnd, OC * C, 1);
        double[] b = Buffers.uniform(rnd, OC, 1);
        double[] dout = Buffers.uniform(rnd, N * OC, 1);
        double[] dinp = new double[N * C], dw = new double[OC * C], db = new double[OC];
        MatmulRef.backward(dinp, dw, db, dout, inp, w, N, C, OC);
        double[] out = new double[N * OC];
        Compare.close("dinp", dinp, FiniteDifferences.gradient(inp, x -> {
            MatmulRef.forward(out, x, w, b, N, C, OC);
            return FiniteDifferences.dot(dout, out);
        }), 1e-7, 1e-8);
        Compare.close("dweight", dw, FiniteDifferences.gradient(w, x -> {
            MatmulRef.forward(out, inp, x, b, N, C, OC);
            return FiniteDifferences.dot(dout, out);
        }), 1e-7, 1e-8);
        Compare.close("dbias", db, FiniteDifferences.gradient(b, x -> {
            MatmulRef.forward(out, inp, w, x, N, C, OC);
            return FiniteDifferences.dot(dout, out);
        }), 1e-7, 1e-8);
    }

    @ParameterizedTest(name = "N={0} C={1} OC={2} bias={3}")
    @CsvSource({"1,1,1,true", "3,7,5,false", "17,33,130,true", "130,257,96,true", "64,48,257,false"})
    void fastMatchesReference(int N, int C, int OC, boolean withBias) {
        long seed = 1000L * N + 31L * C + OC;
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] inp = Buffers.uniform(rnd, N * C, 1);
        double[] w = Buffers.uniform(rnd, OC * C, 1);
        double[] b = withBias ? Buffers.uniform(rnd, OC, 1) : null;
        double[] dout = Buffers.uniform(rnd, N * OC, 1);
        double[] dinp0 = Buffers.uniform(rnd, N * C, 1);
        double[] dw0 = Buffers.uniform(rnd, OC * C, 1);
        double[] db0 = Buffers.uniform(rnd, OC, 1);

        double[] out = new double[N * OC];
        MatmulRef.forward(out, inp, w, b, N, C, OC);
        double[] dinp = dinp0.clone(), dw = dw0.clone(), db = db0.clone();
        MatmulRef.backward(dinp, dw, withBias ? db : null, dout, inp, w, N, C, OC);

        String what = "N=" + N + " C=" + C + " OC=" + OC + " seed=" + seed;
        try (Arena arena = Arena.ofShared()) {
            for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
                MemorySegment sOut = Buffers.poisoned(arena, (long) N * OC);
                MemorySegment sDinp = Buffers.floats(arena, dinp0);
                MemorySegment sDw = Buffers.floats(arena, dw0);
                MemorySegment sDb = Buffers.floats(arena, db0);
                MemorySegment sInp = Buffers.floats(arena, inp);
                MemorySegment sW = Buffers.floats(arena, w);
                Matmul.forward(pool, sOut, sInp, sW, withBias ? Buffers.floats(arena, b) : null, N, C, OC);
                Matmul.backward(pool, sDinp, sDw, withBias ? sDb : null, Buffers.floats(arena, dout), sInp, sW,
                        N, C, OC);
                Compare.close("out " + what, Buffers.read(sOut, N * OC), out, 0, 2.0 * C * C * U + 1e-6);
                Compare.close("dinp " + what, Buffers.read(sDinp, N * C), dinp, 0, 2.0 * OC * OC * U + 1e-6);
                Compare.close("dweight " + what, Buffers.read(sDw, OC * C), dw, 0, 2.0 * N * N * U + 1e-6);
                Compare.close("dbias " + what, Buffers.read(sDb, OC), db, 0, 2.0 * N * N * U + 1e-6);
            }
        }
    }

    /**
     * bf16/fp16 operands against the reference that rounds its inputs first: both multiply the same rounded values,
     * so the fp32 tolerance of the class comment holds unchanged (the rounded values are still in [−1, 1]).
     */
    @ParameterizedTest(name = "{0} N={1} C={2} OC={3} bias={4}")
    @CsvSource({"BF16,1,1,1,true", "BF16,17,33,130,true", "BF16,64,48,257,false", "FP16,3,7,5,false",
        "FP16,130,257,96,true"})
    void lowPrecisionOperandsMatchTheRoundingReference(DType operands, int N, int C, int OC, boolean withBias) {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        double[] inp = Buffers.uniform(rnd, N * C, 1), w = Buffers.uniform(rnd, OC * C, 1);
        double[] b = withBias ? Buffers.uniform(rnd, OC, 1) : null;
        double[] dout = Buffers.uniform(rnd, N * OC, 1);
        double[] dinp0 = Buffers.uniform(rnd, N * C, 1), dw0 = Buffers.uniform(rnd, OC * C, 1);
        double[] db0 = Buffers.uniform(rnd, OC, 1);
        double[] out = new double[N * OC];
        MatmulRef.forward(out, inp, w, b, N, C, OC, operands);
        double[] dinp = dinp0.clone(), dw = dw0.clone(), db = db0.clone();
        MatmulRef.backward(dinp, dw, withBias ? db : null, dout, inp, w, N, C, OC, operands);
        double[] fp32Out = new double[N * OC];
        MatmulRef.forward(fp32Out, inp, w, b, N, C, OC);

        String what = operands + " N=" + N + " C=" + C + " OC=" + OC + " seed=" + seed;
        try (Arena arena = Arena.ofShared()) {
            for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
                MemorySegment sOut = Buffers.poisoned(arena, (long) N * OC);
                MemorySegment sDinp = Buffers.floats(arena, dinp0), sDw = Buffers.floats(arena, dw0);
                MemorySegment sDb = Buffers.floats(arena, db0);
                MemorySegment sInp = Buffers.floats(arena, inp), sW = Buffers.floats(arena, w);
                MemorySegment sDout = Buffers.floats(arena, dout);
                Matmul.forward(pool, sOut, sInp, sW, withBias ? Buffers.floats(arena, b) : null, N, C, OC, operands);
                Matmul.backward(pool, sDinp, sDw, withBias ? sDb : null, sDout, sInp, sW, N, C, OC, operands);
                Compare.close("out " + what, Buffers.read(sOut, N * OC), out, 0, 2.0 * C * C * U + 1e-6);
                Compare.close("dinp " + what, Buffers.read(sDinp, N * C), dinp, 0, 2.0 * OC * OC * U + 1e-6);
                Compare.close("dweight " + what, Buffers.read(sDw, OC * C), dw, 0, 2.0 * N * N * U + 1e-6);
                Compare.close("dbias " + what, Buffers.read(sDb, OC), db, 0, 2.0 * N * N * U + 1e-6);
                assertThat(Buffers.read(sInp, N * C)).as("inp is not modified").containsExactly(inp);
                assertThat(Buffers.read(sDout, N * OC)).as("dout is not modified").containsExactly(dout);
            }
        }
        if (C >= 33) {
            // the rounding is really there: the two float64 references differ by ~√C·2⁻¹²/3 ≥ 1e-3 (fp16's relative
            // rounding is 2⁻¹², bf16's 2⁻⁹); 1e-4 separates that from 0 with room
            double worst = 0;
            for (int i = 0; i < out.length; i++) {
                worst = Math.max(worst, Math.abs(out[i] - fp32Out[i]));
            }
            assertThat(worst).as(what).isGreaterThan(1e-4);
        }
    }

    @Test
    void fp16OverflowShowsAsInfinity() {
        // one input of 1e5 (> fp16's 65504): its row of out is ±inf in fp16, finite in fp32 and bf16
        int N = 3, C = 5, OC = 4;
        SplittableRandom rnd = new SplittableRandom(8);
        double[] inp = Buffers.uniform(rnd, N * C, 1), w = Buffers.uniform(rnd, OC * C, 1);
        inp[C + 2] = 1e5;
        try (Arena arena = Arena.ofShared()) {
            for (DType operands : new DType[] {DType.FP32, DType.BF16, DType.FP16}) {
                MemorySegment out = Buffers.poisoned(arena, (long) N * OC);
                Matmul.forward(POOLS.one(), out, Buffers.floats(arena, inp), Buffers.floats(arena, w), null, N, C, OC,
                        operands);
                double[] got = Buffers.read(out, N * OC);
                for (int i = 0; i < N * OC; i++) {
                    boolean overflowRow = i / OC == 1 && operands == DType.FP16;
                    assertThat(Double.isInfinite(got[i])).as(operands + " out[" + i + "] = " + got[i])
                            .isEqualTo(overflowRow);
                }
            }
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCount() {
        SplittableRandom rnd = new SplittableRandom(5);
        int N = 150, C = 96, OC = 200;
        double[] inp = Buffers.uniform(rnd, N * C, 1), w = Buffers.uniform(rnd, OC * C, 1);
        double[] dout = Buffers.uniform(rnd, N * OC, 1);
        double[][] results = new double[2][];
        try (Arena arena = Arena.ofShared()) {
            for (int p = 0; p < 2; p++) {
                MemorySegment dinp = Buffers.floats(arena, new double[N * C]);
                MemorySegment dw = Buffers.floats(arena, new double[OC * C]);
                MemorySegment db = Buffers.floats(arena, new double[OC]);
                Matmul.backward(p == 0 ? POOLS.one() : POOLS.three(), dinp, dw, db, Buffers.floats(arena, dout),
                        Buffers.floats(arena, inp), Buffers.floats(arena, w), N, C, OC);
                results[p] = concat(Buffers.read(dinp, N * C), Buffers.read(dw, OC * C), Buffers.read(db, OC));
            }
        }
        assertThat(results[1]).containsExactly(results[0]);
    }

    @Test
    void shortBuffersAndBadSizesAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment small = arena.allocate(4 * 4);
            MemorySegment big = arena.allocate(1024 * 4);
            assertThatThrownBy(() -> Matmul.forward(POOLS.one(), big, big.asSlice(2048), small, null, 4, 4, 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("B is 16 bytes");
            assertThatThrownBy(() -> Matmul.forward(POOLS.one(), big, big, big, null, 0, 4, 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("N must be >= 1");
            assertThatThrownBy(() -> Matmul.backward(POOLS.one(), big.asSlice(0, 64), big.asSlice(64, 64), small,
                    big.asSlice(128, 4 * 64), big.asSlice(512, 64), big.asSlice(768, 64), 4, 4, 16))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dbias holds 4 floats, 16");
        }
    }

    private static double[] concat(double[]... parts) {
        int n = 0;
        for (double[] p : parts) {
            n += p.length;
        }
        double[] all = new double[n];
        int at = 0;
        for (double[] p : parts) {
            System.arraycopy(p, 0, all, at, p.length);
            at += p.length;
        }
        return all;
    }
}
