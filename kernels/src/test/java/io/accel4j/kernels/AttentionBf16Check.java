package io.accel4j.kernels;

import io.accel4j.core.Bf16;
import io.accel4j.cpu.ref.AttentionRef;
import java.util.SplittableRandom;

/**
 * One bf16 attention case for the emulator and GPU tests: random bf16 inputs, the float64 reference of them
 * (vector-cpu's {@link AttentionRef} when causal, {@link FullAttentionRef} when not) and the comparison.
 *
 * <p>What is compared: out (bf16) and each of dQ, dK, dV (the three column blocks of dqkv, bf16), element by element,
 * to within a tolerance times the largest reference magnitude of that tensor (or block); lse (fp32) likewise.
 *
 * @param B      batch
 * @param T      sequence length
 * @param C      channels (NH heads of hs = C/NH ∈ {64, 128})
 * @param NH     heads
 * @param causal whether keys after the query are masked
 */
record AttentionBf16Check(int B, int T, int C, int NH, boolean causal) {

    /**
     * out and dqkv relative to the largest |reference| of the tensor: each is rounded to bf16 at the end (8 bits of
     * mantissa: ≤ 2⁻⁹ ≈ 2e-3 relative), and inside, P and dS are rounded to bf16 before their second product and D
     * is summed from the bf16 out; fp32 accumulation adds ~1e-6. The emulator measured ≤ 4e-3 at T ≤ 130;
     * 1e-2 is 2.5× that. A wrong mask, tile bound or missing rescale is off by ≥ 1e-1.
     */
    static final double BF16_TOL = 1e-2;
    /**
     * lse (fp32, from bf16 inputs whose products are exact in fp32): fp32 sums of ≤ 128-term dot products and ≤ T
     * exponentials, ~1e-7 relative measured; 1e-5 of the largest |lse| (or of 1) leaves ~100× slack.
     */
    static final double LSE_TOL = 1e-5;
    /**
     * A dqkv block whose reference is exactly zero (T = 1: a single key, so dS = 0) is held to this fraction of the
     * whole dqkv's largest magnitude instead (dP and D are the same sum in two orders, so dS is a few ulp, not 0).
     */
    static final double ZERO_BLOCK_FLOOR = 1e-3;

    int hs() {
        return C / NH;
    }

    @Override
    public String toString() {
        return "B " + B + " T " + T + " C " + C + " NH " + NH + " (hs " + hs() + ")" + (causal ? " causal" : "");
    }

    /** Random inputs (bf16 codes), seeded, and the reference results of their exact values. */
    Inputs inputs(long seed) {
        long btc = (long) B * T * C;
        SplittableRandom r = new SplittableRandom(seed);
        short[] qkv = new short[Math.toIntExact(3 * btc)], dout = new short[Math.toIntExact(btc)];
        for (int i = 0; i < qkv.length; i++) {
            qkv[i] = Bf16.fromFloat((float) r.nextDouble(-2, 2));
        }
        for (int i = 0; i < dout.length; i++) {
            dout[i] = Bf16.fromFloat((float) r.nextDouble(-1, 1));
        }
        double[] q = decode(qkv), g = decode(dout);
        double[] out = new double[dout.length], lse = new double[B * NH * T], dqkv = new double[qkv.length];
        if (causal) {
            AttentionRef.forward(out, lse, q, B, T, C, NH);
            AttentionRef.backward(dqkv, g, q, out, lse, B, T, C, NH);
        } else {
            FullAttentionRef.forwardBackward(out, lse, dqkv, q, g, B, T, C, NH, false);
        }
        return new Inputs(qkv, dout, out, lse, dqkv, seed);
    }

    /** The inputs (bf16 codes) and the reference outputs of one case. */
    record Inputs(short[] qkv, short[] dout, double[] out, double[] lse, double[] dqkv, long seed) {}

    /** Fails, naming the tensor, element, values and seed, unless the kernels' results are within tolerance. */
    void check(Inputs in, short[] out, float[] lse, short[] dqkv) {
        checkForward(in, out, lse);
        String what = this + ", seed " + in.seed();
        double[] d = decode(dqkv);
        double all = largest(in.dqkv(), 0, 1, 1);
        String[] names = {"dQ", "dK", "dV"};
        for (int part = 0; part < 3; part++) {
            double big = Math.max(largest(in.dqkv(), part * C, C, 3 * C), ZERO_BLOCK_FLOOR * all);
            within(names[part] + " " + what, d, in.dqkv(), part * C, C, 3 * C, big, BF16_TOL);
        }
    }

    /** Fails, naming the tensor, element, values and seed, unless the forward's out and lse are within tolerance. */
    void checkForward(Inputs in, short[] out, float[] lse) {
        String what = this + ", seed " + in.seed();
        within("out " + what, decode(out), in.out(), 0, 1, 1, largest(in.out(), 0, 1, 1), BF16_TOL);
        double[] l = new double[lse.length];
        for (int i = 0; i < lse.length; i++) {
            l[i] = lse[i];
        }
        within("lse " + what, l, in.lse(), 0, 1, 1, Math.max(1, largest(in.lse(), 0, 1, 1)), LSE_TOL);
    }

    /** Elements i with i mod period in [from, from + width): |got − want| ≤ tol·big (NaN fails). */
    private static void within(String what, double[] got, double[] want, int from, int width, int period, double big,
                               double tol) {
        for (int i = 0; i < want.length; i++) {
            int col = i % period;
            if (col < from || col >= from + width) {
                continue;
            }
            if (!(Math.abs(got[i] - want[i]) <= tol * big)) {
                throw new AssertionError(what + ": element " + i + " is " + got[i] + ", reference " + want[i]
                        + " (tolerance " + tol + " × " + big + ", the largest |reference|)");
            }
        }
    }

    private static double largest(double[] x, int from, int width, int period) {
        double m = 0;
        for (int i = 0; i < x.length; i++) {
            int col = i % period;
            if (col >= from && col < from + width) {
                m = Math.max(m, Math.abs(x[i]));
            }
        }
        return m;
    }

    static double[] decode(short[] h) {
        double[] x = new double[h.length];
        for (int i = 0; i < h.length; i++) {
            x[i] = Bf16.toFloat(h[i]);
        }
        return x;
    }
}
