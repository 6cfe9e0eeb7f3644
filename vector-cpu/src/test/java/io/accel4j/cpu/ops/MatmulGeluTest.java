package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.MatmulRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The MLP's fused GELU matmuls ({@link Matmul#forwardGelu}, {@link Matmul#backwardGelu}) against the unfused
 * composition they replace (bit for bit, except the fused bias gradient's summation order), against the float64
 * reference, and against {@link Ops}' default composition; every output poisoned or pre-filled, odd sizes chosen to
 * reach each route of the GEMM driver (one K block, several, columns split over threads, split K), all three
 * operand precisions, 1 and 3 threads.
 *
 * <p>Tolerances against float64, inputs in [−1, 1]: a K-term fp32 dot product errs by at most K·u·K (u = 2⁻²⁴,
 * {@link MatmulTest}), so pre and the backward's product get {@code 2·K²·u}; GELU and its derivative have slopes
 * below 1.13 and 1 (in magnitude) and {@code GeluMath}'s rational tanh adds a few ulp ({@code 1e-5·max|g|} covers
 * gelu' of up to 100 ulp, the cancellation in 1 − tanh² included); a bias gradient adds N of those errors plus its own
 * N-term summation. The fused bias gradient against the unfused one: both sum the same N fp32 values (dpre is
 * bit-identical) in different orders, so they differ by at most 2·(N+1)·u·(|start| + Σ|dpre|) per column.
 */
class MatmulGeluTest {

    static final double U = 0x1p-24;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** Inputs of one case, random in [−1, 1], and the pre-filled gradients. */
    record Case(int N, int C, int OC, DType operands, boolean withBias, long seed, double[] inp, double[] w,
                double[] b, double[] dout, double[] pre, double[] dw0, double[] db0, double[] dpb0) {

        static Case of(int N, int C, int OC, DType operands, boolean withBias, long seed) {
            SplittableRandom rnd = new SplittableRandom(seed);
            // fwd: inp (N,C)·w (OC,C)ᵀ; bwd (the projection): dout (N,OC)·w (OC,C), pre (N,C) spanning both tails
            return new Case(N, C, OC, operands, withBias, seed, Buffers.uniform(rnd, N * C, 1),
                    Buffers.uniform(rnd, OC * C, 1), withBias ? Buffers.uniform(rnd, OC, 1) : null,
                    Buffers.uniform(rnd, N * OC, 1), Buffers.uniform(rnd, N * C, 7), Buffers.uniform(rnd, OC * C, 1),
                    Buffers.uniform(rnd, OC, 1), Buffers.uniform(rnd, C, 1));
        }

        String what() {
            return operands + " N=" + N + " C=" + C + " OC=" + OC + " bias=" + withBias + " seed=" + seed;
        }
    }

    /** What a backward call wrote, read back. */
    record Grads(double[] dpre, double[] dpreBias, double[] dw, double[] db) {}

    @ParameterizedTest(name = "{0} N={1} C={2} OC={3} bias={4}")
    @CsvSource({"FP32,1,1,1,true", "FP32,3,7,5,false", "BF16,17,33,130,true", "FP16,130,257,96,true",
        "FP32,64,600,257,true", "BF16,64,600,257,false", "FP16,9,160,700,true", "FP32,9,160,700,false",
        "BF16,20,40,40,true"})
    void forwardEqualsMatmulThenGeluAndTheReference(DType operands, int N, int C, int OC, boolean withBias) {
        Case k = Case.of(N, C, OC, operands, withBias, System.nanoTime());
        double[] pre = new double[N * OC], out = new double[N * OC];
        MatmulRef.forwardGelu(out, pre, k.inp, k.w, k.b, N, C, OC, operands);
        double preAbs = 2.0 * C * C * U + 1e-6;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = Buffers.floats(arena, k.inp), w = Buffers.floats(arena, k.w);
            MemorySegment b = withBias ? Buffers.floats(arena, k.b) : null;
            for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
                String what = k.what() + " threads=" + pool.threads();
                MemorySegment sOut = Buffers.poisoned(arena, (long) N * OC);
                MemorySegment sPre = Buffers.poisoned(arena, (long) N * OC);
                Matmul.forwardGelu(pool, sOut, sPre, inp, w, b, N, C, OC, operands);
                MemorySegment uOut = Buffers.poisoned(arena, (long) N * OC);
                MemorySegment uPre = Buffers.poisoned(arena, (long) N * OC);
                Matmul.forward(pool, uPre, inp, w, b, N, C, OC, operands);
                Gelu.forward(pool, uOut, uPre, (long) N * OC);
                sameBits("pre " + what, Buffers.read(sPre, N * OC), Buffers.read(uPre, N * OC));
                sameBits("out " + what, Buffers.read(sOut, N * OC), Buffers.read(uOut, N * OC));
                Compare.close("pre " + what, Buffers.read(sPre, N * OC), pre, 0, preAbs);
                Compare.close("out " + what, Buffers.read(sOut, N * OC), out, 1e-6, 1.2 * preAbs + 1e-6);
            }
        }
    }

    @ParameterizedTest(name = "{0} N={1} C={2} OC={3} bias={4}")
    @CsvSource({"FP32,1,1,1,true", "FP32,3,7,5,false", "BF16,17,33,130,true", "FP16,130,96,257,true",
        "FP32,64,257,600,true", "BF16,64,257,600,false", "FP16,9,700,160,true", "FP32,9,700,160,true",
        "FP32,3,17,8200,true", "BF16,21,40,40,true"})
    void backwardEqualsMatmulThenGeluAndTheReference(DType operands, int N, int C, int OC, boolean withBias) {
        Case k = Case.of(N, C, OC, operands, withBias, System.nanoTime());
        double[] dpre = new double[N * C], dpb = k.dpb0.clone(), dw = k.dw0.clone(), db = k.db0.clone();
        MatmulRef.backwardGelu(dpre, dpb, dw, withBias ? db : null, k.dout, k.inp, Buffers.roundToFloat(k.pre), k.w,
                N, C, OC, operands);
        double[] g = new double[N * C]; // dout·weight, whose size scales gelu''s own error
        MatmulRef.backward(g, new double[OC * C], null, k.dout, k.inp, k.w, N, C, OC, operands);
        double gMax = Compare.maxAbs(g);
        double dpreAbs = 1.2 * (2.0 * OC * OC * U + 1e-6) + 1e-5 * gMax;
        Grads[] byPool = new Grads[2];
        try (Arena arena = Arena.ofShared()) {
            for (int p = 0; p < 2; p++) {
                Parallel pool = p == 0 ? POOLS.one() : POOLS.three();
                String what = k.what() + " threads=" + pool.threads();
                Grads fused = fused(arena, pool, k);
                Grads unfused = unfused(arena, pool, k);
                sameBits("dpre " + what, fused.dpre, unfused.dpre);
                sameBits("dweight " + what, fused.dw, unfused.dw);
                sameBits("dbias " + what, fused.db, unfused.db);
                sameSumUpToOrder("dpreBias " + what, fused.dpreBias, unfused.dpreBias, k.dpb0, fused.dpre, N, C);
                Compare.close("dpre " + what, fused.dpre, dpre, 0, dpreAbs);
                Compare.close("dpreBias " + what, fused.dpreBias, dpb, 0, N * dpreAbs + 2.0 * N * N * U * gMax);
                Compare.close("dweight " + what, fused.dw, dw, 0, 2.0 * N * N * U + 1e-6);
                if (withBias) {
                    Compare.close("dbias " + what, fused.db, db, 0, 2.0 * N * N * U + 1e-6);
                }
                byPool[p] = fused;
            }
        }
        sameBits("dpreBias on 3 threads vs 1 " + k.what(), byPool[1].dpreBias, byPool[0].dpreBias);
    }

    /** {@link Matmul#backwardGelu} into poisoned dpre and the pre-filled gradients. */
    static Grads fused(Arena arena, Parallel pool, Case k) {
        int N = k.N, C = k.C, OC = k.OC;
        MemorySegment dpre = Buffers.poisoned(arena, (long) N * C), dpb = Buffers.floats(arena, k.dpb0);
        MemorySegment dw = Buffers.floats(arena, k.dw0), db = Buffers.floats(arena, k.db0);
        Matmul.backwardGelu(pool, dpre, dpb, dw, k.withBias ? db : null, Buffers.floats(arena, k.dout),
                Buffers.floats(arena, k.inp), Buffers.floats(arena, k.pre), Buffers.floats(arena, k.w), N, C, OC,
                k.operands);
        return new Grads(Buffers.read(dpre, N * C), Buffers.read(dpb, C), Buffers.read(dw, OC * C),
                Buffers.read(db, OC));
    }

    /** The composition the fusion replaces: backward into zeros, GELU backward into zeros, the column sum. */
    static Grads unfused(Arena arena, Parallel pool, Case k) {
        int N = k.N, C = k.C, OC = k.OC;
        MemorySegment g = Buffers.floats(arena, new double[N * C]), dpre = Buffers.floats(arena, new double[N * C]);
        MemorySegment dpb = Buffers.floats(arena, k.dpb0);
        MemorySegment dw = Buffers.floats(arena, k.dw0), db = Buffers.floats(arena, k.db0);
        MemorySegment pre = Buffers.floats(arena, k.pre);
        Matmul.backward(pool, g, dw, k.withBias ? db : null, Buffers.floats(arena, k.dout),
                Buffers.floats(arena, k.inp), Buffers.floats(arena, k.w), N, C, OC, k.operands);
        Gelu.backward(pool, dpre, pre, g, (long) N * C);
        Matmul.biasBackward(pool, dpb, dpre, N, C);
        return new Grads(Buffers.read(dpre, N * C), Buffers.read(dpb, C), Buffers.read(dw, OC * C),
                Buffers.read(db, OC));
    }

    /** Two fp32 sums of the same N terms onto the same start, in different orders: within 2·(N+1)·u·Σ|·|. */
    static void sameSumUpToOrder(String what, double[] a, double[] b, double[] start, double[] terms, int N, int C) {
        for (int c = 0; c < C; c++) {
            double mass = Math.abs(start[c]);
            for (int n = 0; n < N; n++) {
                mass += Math.abs(terms[n * C + c]);
            }
            double bound = 2.0 * (N + 1) * U * mass;
            if (!(Math.abs(a[c] - b[c]) <= bound)) {
                fail(what + ": column " + c + " is " + a[c] + " fused, " + b[c] + " unfused, more than " + bound
                        + " apart");
            }
        }
    }

    @Test
    void opsDefaultCompositionMatchesTheFusedKernels() throws Exception {
        Case k = Case.of(37, 50, 23, DType.BF16, true, 77);
        int N = k.N, C = k.C, OC = k.OC;
        CpuOps cpu = new CpuOps(POOLS.three());
        try (Arena arena = Arena.ofShared()) {
            Ops composed = defaultsOver(cpu);
            MemorySegment inp = Buffers.floats(arena, k.inp), w = Buffers.floats(arena, k.w);
            MemorySegment b = Buffers.floats(arena, k.b);
            MemorySegment[] outs = new MemorySegment[4];
            for (int i = 0; i < 2; i++) {
                outs[2 * i] = Buffers.poisoned(arena, (long) N * OC);
                outs[2 * i + 1] = Buffers.poisoned(arena, (long) N * OC);
                (i == 0 ? cpu : composed).matmulForwardGelu(outs[2 * i], outs[2 * i + 1], inp, w, b, N, C, OC,
                        k.operands);
            }
            sameBits("out", Buffers.read(outs[2], N * OC), Buffers.read(outs[0], N * OC));
            sameBits("pre", Buffers.read(outs[3], N * OC), Buffers.read(outs[1], N * OC));

            Grads[] g = new Grads[2];
            for (int i = 0; i < 2; i++) {
                MemorySegment dpre = Buffers.poisoned(arena, (long) N * C), dpb = Buffers.floats(arena, k.dpb0);
                MemorySegment dw = Buffers.floats(arena, k.dw0), db = Buffers.floats(arena, k.db0);
                (i == 0 ? cpu : composed).matmulBackwardGelu(dpre, dpb, dw, db, Buffers.floats(arena, k.dout),
                        inp, Buffers.floats(arena, k.pre), w, N, C, OC, k.operands);
                g[i] = new Grads(Buffers.read(dpre, N * C), Buffers.read(dpb, C), Buffers.read(dw, OC * C),
                        Buffers.read(db, OC));
            }
            sameBits("dpre", g[1].dpre, g[0].dpre);
            sameBits("dweight", g[1].dw, g[0].dw);
            sameBits("dbias", g[1].db, g[0].db);
            sameSumUpToOrder("dpreBias", g[1].dpreBias, g[0].dpreBias, k.dpb0, g[0].dpre, N, C);
        }
    }

    /** An {@link Ops} that runs {@code cpu}'s kernels but {@link Ops}' own default for the fused GELU methods. */
    static Ops defaultsOver(CpuOps cpu) {
        InvocationHandler h = (proxy, m, args) -> {
            if (m.getName().endsWith("Gelu") && m.getName().startsWith("matmul")) {
                return InvocationHandler.invokeDefault(proxy, m, args);
            }
            try {
                return m.invoke(cpu, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        };
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class}, h);
    }

    @Test
    void overlapsAndShortBuffersAreRefused() {
        int N = 4, C = 6, OC = 8;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment inp = arena.allocate(4L * N * C), w = arena.allocate(4L * OC * C);
            MemorySegment big = arena.allocate(4L * 2 * N * OC);
            MemorySegment out = big.asSlice(0, 4L * N * OC), overlapping = big.asSlice(4, 4L * N * OC);
            assertThatThrownBy(() -> Matmul.forwardGelu(POOLS.one(), out, overlapping, inp, w, null, N, C, OC, DType.FP32))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
            assertThatThrownBy(() -> Matmul.forwardGelu(POOLS.one(), out, arena.allocate(4L * N * OC - 4), inp, w, null,
                    N, C, OC, DType.FP32)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pre");
            MemorySegment dout = arena.allocate(4L * N * OC), pre = arena.allocate(4L * N * C);
            MemorySegment dw = arena.allocate(4L * OC * C);
            assertThatThrownBy(() -> Matmul.backwardGelu(POOLS.one(), pre, null, dw, null, dout, inp, pre, w, N, C, OC,
                    DType.FP32)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps pre");
            assertThatThrownBy(() -> Matmul.backwardGelu(POOLS.one(), arena.allocate(4L * N * C), arena.allocate(4L * C - 4),
                    dw, null, dout, inp, pre, w, N, C, OC, DType.FP32))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("biasGrad");
            assertThatThrownBy(() -> Matmul.backwardGelu(POOLS.one(), arena.allocate(4L * N * C), null, dw, null, dout,
                    inp, pre, w, N, C, OC, DType.FP8_E4M3)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    /** Every element of {@code actual} has the bits of {@code expected}'s (AssertJ's containsExactly: seconds). */
    static void sameBits(String what, double[] actual, double[] expected) {
        assertThat(actual.length).as(what + ": length").isEqualTo(expected.length);
        for (int i = 0; i < actual.length; i++) {
            if (Double.doubleToRawLongBits(actual[i]) != Double.doubleToRawLongBits(expected[i])) {
                fail(what + ": element " + i + " is " + actual[i] + ", expected exactly " + expected[i]);
            }
        }
    }
}
