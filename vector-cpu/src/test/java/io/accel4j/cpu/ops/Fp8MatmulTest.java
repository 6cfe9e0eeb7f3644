package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.MatmulRef;
import io.accel4j.cpu.testing.Buffers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The FP8 linear layer of {@link CpuOps} (hybrid recipe: inp, weight E4M3; dout E5M2) against (1) the float64
 * reference computed on the same quantised operands ({@link MatmulRef#fp8}), which it must match up to fp32
 * accumulation, (2) the fp32 layer, which it must approach within the formats' rounding, and (3) the delayed-scaling
 * rules as seen through the layer: the scale comes from earlier steps, overflow saturates, a zero amax keeps the scale.
 */
class Fp8MatmulTest {

    static final double U = 0x1p-24;
    /**
     * Against the quantised reference: a K-term fp32 sum errs by at most about K·u·Σ|terms| (recursive summation; the
     * GEMM's blocked sum is no worse), the dequantisation factor scaleInvA·scaleInvB is rounded once (u·|sum|), and a
     * pre-filled gradient adds one more rounding; 2 leaves room for the bound's constant.
     */
    static final double ACCUMULATION_FACTOR = 2;
    /**
     * Relative Frobenius error against fp32 when the scales cover the data (as in DelayedScalingGemmTest): E4M3 has 3
     * mantissa bits, a relative rounding error of at most 2⁻⁴, ~0.02 rms per operand, ~0.03 for a product of two
     * (measured 0.03–0.04); 0.05 leaves room for the seed.
     */
    static final double E4M3_TOL = 0.05;
    /** E5M2 (2 mantissa bits) × E4M3: ~0.05 rms (measured 0.05–0.06); 0.08 likewise. */
    static final double E5M2_TOL = 0.08;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** The layer's operands: inputs of magnitude ~{@code xMag}, weights ~0.1, dout ~{@code gMag}. */
    record Case(int N, int C, int OC, double[] inp, double[] w, double[] b, double[] dout, double[] dinp0,
                double[] dw0, double[] db0) {
        static Case random(SplittableRandom rnd, int N, int C, int OC, boolean withBias, double xMag, double gMag) {
            return new Case(N, C, OC, Buffers.uniform(rnd, N * C, xMag), Buffers.uniform(rnd, OC * C, 0.1),
                    withBias ? Buffers.uniform(rnd, OC, 1) : null, Buffers.uniform(rnd, N * OC, gMag),
                    Buffers.uniform(rnd, N * C, xMag * gMag), Buffers.uniform(rnd, OC * C, xMag * gMag),
                    Buffers.uniform(rnd, OC, gMag));
        }
    }

    /** A hybrid layer state whose scales were computed from one step that saw amaxes {@code ax, aw, ag}. */
    static Fp8Scaling calibrated(double ax, double aw, double ag) {
        Fp8Scaling s = Fp8Scaling.of(new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0,
                DelayedScaling.Algorithm.MAX));
        s.input().record((float) ax);
        s.weight().record((float) aw);
        s.gradOutput().record((float) ag);
        s.update();
        return s;
    }

    @ParameterizedTest(name = "N={0} C={1} OC={2} bias={3}")
    @CsvSource({"1,1,1,true", "3,7,5,false", "17,33,130,true", "130,257,96,true", "64,48,257,false"})
    void matchesTheReferenceOnTheQuantisedOperands(int N, int C, int OC, boolean withBias) {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        Case k = Case.random(rnd, N, C, OC, withBias, 3, 1e-3);
        // scales from a step whose magnitudes differ from this one's (delayed): some codes saturate, none overflow
        Fp8Scaling fp8 = calibrated(2.5, 0.08, 2e-3);
        float sx = fp8.input().scale(), sw = fp8.weight().scale(), sg = fp8.gradOutput().scale();
        double[] qx = MatmulRef.fp8(k.inp, DType.FP8_E4M3, sx), qw = MatmulRef.fp8(k.w, DType.FP8_E4M3, sw);
        double[] qg = MatmulRef.fp8(k.dout, DType.FP8_E5M2, sg);
        double[] out = new double[N * OC], outMag = new double[N * OC];
        MatmulRef.forward(out, qx, qw, k.b, N, C, OC);
        MatmulRef.forward(outMag, abs(qx), abs(qw), k.b == null ? null : abs(k.b), N, C, OC);
        double[] dinp = k.dinp0.clone(), dw = k.dw0.clone(), db = k.db0.clone();
        MatmulRef.backward(dinp, dw, null, qg, qx, qw, N, C, OC);
        double[] dinpMag = abs(k.dinp0), dwMag = abs(k.dw0);
        MatmulRef.backward(dinpMag, dwMag, null, abs(qg), abs(qx), abs(qw), N, C, OC);
        double[] dbMag = abs(k.db0);
        if (withBias) {
            MatmulRef.backward(new double[N * C], new double[OC * C], db, k.dout, k.inp, k.w, N, C, OC);
            MatmulRef.backward(new double[N * C], new double[OC * C], dbMag, abs(k.dout), k.inp, k.w, N, C, OC);
        }
        String what = "N=" + N + " C=" + C + " OC=" + OC + " seed=" + seed;
        try (Arena arena = Arena.ofShared()) {
            for (Parallel pool : new Parallel[] {POOLS.one(), POOLS.three()}) {
                CpuOps cpu = new CpuOps(pool);
                Fp8Scaling state = calibrated(2.5, 0.08, 2e-3);
                MemorySegment sOut = Buffers.poisoned(arena, (long) N * OC);
                MemorySegment sInp = Buffers.floats(arena, k.inp), sW = Buffers.floats(arena, k.w);
                MemorySegment sDout = Buffers.floats(arena, k.dout), sDb = Buffers.floats(arena, k.db0);
                MemorySegment sDinp = Buffers.floats(arena, k.dinp0), sDw = Buffers.floats(arena, k.dw0);
                cpu.matmulForward(sOut, sInp, sW, withBias ? Buffers.floats(arena, k.b) : null, N, C, OC, state);
                cpu.matmulBackward(sDinp, sDw, withBias ? sDb : null, sDout, sInp, sW, N, C, OC, state);
                within("out " + what, Buffers.read(sOut, N * OC), out, outMag, C);
                within("dinp " + what, Buffers.read(sDinp, N * C), dinp, dinpMag, OC);
                within("dweight " + what, Buffers.read(sDw, OC * C), dw, dwMag, N);
                if (withBias) {
                    within("dbias (fp32 dout) " + what, Buffers.read(sDb, OC), db, dbMag, N);
                }
                assertThat(Buffers.read(sInp, N * C)).as("inp is not modified").containsExactly(k.inp);
                assertThat(Buffers.read(sDout, N * OC)).as("dout is not modified").containsExactly(k.dout);
                // the amaxes of this step's casts, of the fp32 values, recorded for the next step
                assertThat(last(state.input())).as("input amax " + what).isEqualTo((float) maxAbs(k.inp));
                assertThat(last(state.weight())).as("weight amax " + what).isEqualTo((float) maxAbs(k.w));
                assertThat(last(state.gradOutput())).as("dout amax " + what).isEqualTo((float) maxAbs(k.dout));
                assertThat(state.input().scale()).as("the scales change only on update()").isEqualTo(sx);
            }
        }
    }

    @Test
    void approachesFp32WhenTheScalesCoverTheData() {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        int N = 64, C = 96, OC = 80;
        Case k = Case.random(rnd, N, C, OC, true, 2, 1e-4);
        double[] out = new double[N * OC], dinp = new double[N * C], dw = new double[OC * C];
        MatmulRef.forward(out, k.inp, k.w, k.b, N, C, OC);
        MatmulRef.backward(dinp, dw, null, k.dout, k.inp, k.w, N, C, OC);
        try (Arena arena = Arena.ofShared()) {
            CpuOps cpu = new CpuOps(POOLS.three());
            Fp8Scaling fp8 = calibrated(maxAbs(k.inp), maxAbs(k.w), maxAbs(k.dout));
            MemorySegment sOut = Buffers.poisoned(arena, (long) N * OC);
            MemorySegment sInp = Buffers.floats(arena, k.inp), sW = Buffers.floats(arena, k.w);
            MemorySegment sDinp = Buffers.floats(arena, new double[N * C]);
            MemorySegment sDw = Buffers.floats(arena, new double[OC * C]);
            cpu.matmulForward(sOut, sInp, sW, Buffers.floats(arena, k.b), N, C, OC, fp8);
            cpu.matmulBackward(sDinp, sDw, null, Buffers.floats(arena, k.dout), sInp, sW, N, C, OC, fp8);
            // the bias is exact, so compare the products: out − bias
            double[] got = Buffers.read(sOut, N * OC), prod = out.clone();
            for (int i = 0; i < got.length; i++) {
                got[i] -= k.b[i % OC];
                prod[i] -= k.b[i % OC];
            }
            String what = " (seed " + seed + ")";
            double eOut = relativeError(got, prod), eDinp = relativeError(Buffers.read(sDinp, N * C), dinp);
            double eDw = relativeError(Buffers.read(sDw, OC * C), dw);
            assertThat(eOut).as("out, E4M3 x E4M3" + what).isLessThanOrEqualTo(E4M3_TOL).isGreaterThan(1e-3);
            assertThat(eDinp).as("dinp, E5M2 x E4M3" + what).isLessThanOrEqualTo(E5M2_TOL).isGreaterThan(1e-3);
            assertThat(eDw).as("dweight, E5M2 x E4M3" + what).isLessThanOrEqualTo(E5M2_TOL).isGreaterThan(1e-3);
        }
    }

    @Test
    void theScaleComesFromEarlierStepsOverflowSaturatesAndZeroKeepsTheScale() {
        SplittableRandom rnd = new SplittableRandom(21);
        int N = 9, C = 40, OC = 12;
        Case k = Case.random(rnd, N, C, OC, true, 1, 1);
        try (Arena arena = Arena.ofShared()) {
            CpuOps cpu = new CpuOps(POOLS.one());
            Fp8Scaling fp8 = Fp8Scaling.of(new DelayedScaling(DelayedScaling.Format.HYBRID, 2, 0,
                    DelayedScaling.Algorithm.MAX));
            MemorySegment out = Buffers.poisoned(arena, (long) N * OC), w = Buffers.floats(arena, k.w);
            MemorySegment bias = Buffers.floats(arena, k.b);
            // step 1: no history yet, scale 1; the amax is recorded, the scale moves only on update
            cpu.matmulForward(out, Buffers.floats(arena, k.inp), w, bias, N, C, OC, fp8);
            assertThat(fp8.input().scale()).isEqualTo(1f);
            fp8.update();
            float amax = (float) maxAbs(k.inp);
            assertThat(fp8.input().scale()).as("448 / amax").isEqualTo(448f / amax);
            assertThat(fp8.gradOutput().scale()).as("not cast forward: nothing recorded").isEqualTo(1f);
            // step 2: 16× larger inputs with step 1's scale saturate at ±448 codes: finite, far from fp32
            double[] big = scaled(k.inp, 16);
            cpu.matmulForward(out, Buffers.floats(arena, big), w, bias, N, C, OC, fp8);
            double[] got = Buffers.read(out, N * OC), ref = new double[N * OC];
            MatmulRef.forward(ref, big, k.w, k.b, N, C, OC);
            double[] expected = new double[N * OC];
            MatmulRef.forward(expected, MatmulRef.fp8(big, DType.FP8_E4M3, 448f / amax),
                    MatmulRef.fp8(k.w, DType.FP8_E4M3, fp8.weight().scale()), k.b, N, C, OC);
            for (int i = 0; i < got.length; i++) {
                assertThat(Double.isFinite(got[i])).as("out[" + i + "] saturates, no inf/NaN").isTrue();
                assertThat(got[i]).as("out[" + i + "] = the saturated reference").isCloseTo(expected[i],
                        Offset.offset(1e-4 * (1 + Math.abs(expected[i]))));
            }
            assertThat(relativeError(got, ref)).as("saturated: far off").isGreaterThan(0.3);
            fp8.update();
            assertThat(fp8.input().scale()).as("the window's max is now 16x").isEqualTo(448f / last16(k.inp));
            float scale = fp8.input().scale();
            // steps 3, 4: an all-zero input gives amax 0: out is the bias exactly, and the scale is kept once the
            // window holds only zeros
            for (int step = 0; step < 3; step++) {
                cpu.matmulForward(out, Buffers.floats(arena, new double[N * C]), w, bias, N, C, OC, fp8);
                double[] o = Buffers.read(out, N * OC);
                for (int i = 0; i < o.length; i++) {
                    assertThat(o[i]).isEqualTo((double) (float) k.b[i % OC]);
                }
                fp8.update();
            }
            assertThat(fp8.input().amaxes()).containsOnly(0f);
            assertThat(fp8.input().scale()).as("zero amax keeps the scale").isEqualTo(scale);
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (Arena arena = Arena.ofShared()) {
            CpuOps cpu = new CpuOps(POOLS.one());
            Fp8Scaling fp8 = calibrated(1, 1, 1);
            MemorySegment small = Buffers.poisoned(arena, 5);
            assertThatThrownBy(() -> cpu.matmulForward(Buffers.poisoned(arena, 12), small, Buffers.poisoned(arena, 12),
                    null, 2, 3, 4, fp8)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp");
            assertThatThrownBy(() -> cpu.matmulForward(small, small, small, null, 1, 1, 1, (Fp8Scaling) null))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("fp8");
            AmaxHistory e5 = new AmaxHistory(DType.FP8_E5M2, 1, 0, DelayedScaling.Algorithm.MAX);
            assertThatThrownBy(() -> new Fp8Scaling(e5, new AmaxHistory(DType.FP8_E5M2, 1, 0,
                    DelayedScaling.Algorithm.MAX), fp8.input())).hasMessageContaining("both FP8_E5M2");
        }
    }

    /** Every element within ACCUMULATION_FACTOR·(K+2)·u·magnitude of the reference. */
    private static void within(String what, double[] got, double[] ref, double[] mag, int K) {
        for (int i = 0; i < got.length; i++) {
            double bound = ACCUMULATION_FACTOR * (K + 2) * U * mag[i] + Double.MIN_NORMAL;
            assertThat(Math.abs(got[i] - ref[i])).as(what + " [" + i + "] = " + got[i] + ", expected " + ref[i])
                    .isLessThanOrEqualTo(bound);
        }
    }

    private static float last(AmaxHistory h) {
        float[] a = h.amaxes();
        return a[a.length - 1];
    }

    private static float last16(double[] x) {
        return (float) maxAbs(scaled(x, 16));
    }

    private static double[] scaled(double[] x, double f) {
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = (float) x[i] * f;
        }
        return r;
    }

    private static double[] abs(double[] x) {
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = Math.abs(x[i]);
        }
        return r;
    }

    private static double maxAbs(double[] x) {
        double m = 0;
        for (double v : x) {
            m = Math.max(m, Math.abs((float) v));
        }
        return m;
    }

    private static double relativeError(double[] got, double[] ref) {
        double d = 0, n = 0;
        for (int i = 0; i < got.length; i++) {
            d += (got[i] - ref[i]) * (got[i] - ref[i]);
            n += ref[i] * ref[i];
        }
        return Math.sqrt(d / n);
    }
}
