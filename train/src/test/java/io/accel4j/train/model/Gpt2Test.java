package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Span;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The whole model: the float64 reference ({@link Gpt2Ref}) against central finite differences, then the fast model
 * (fp32, through {@link CpuOps}) against the reference, on a tiny config with odd sizes (V = 11 padded to 16, T = 5
 * not a multiple of any tile, head size 4).
 */
class Gpt2Test {

    static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);
    static final int B = 2, T = 5;
    private static final long SEED = 20240326L;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    /** Central-difference step: truncation error ~h²·f''' ≈ 1e-10, rounding ~1e-16/h ≈ 1e-11 on a loss of ~3. */
    private static final double FD_STEP = 1e-5;
    /** Reference gradient vs finite differences: both errors above, with a 100× margin. */
    private static final double FD_ABS = 1e-8, FD_REL = 1e-6;
    /**
     * Fast vs reference, relative to the largest gradient of the tensor: fp32 rounding (2⁻²⁴ ≈ 6e-8) through ~25
     * ops forward and back, each adding a few ulps relative to the magnitudes it sums, amplified by the LayerNorms'
     * 1/σ: measured ≤ 2e-6 on this config; 2e-5 leaves a 10× margin and still catches any wrong term (which is O(1)).
     */
    private static final double FAST_REL = 2e-5;
    /** Fast vs reference loss: a sum of 10 fp32 cross-entropies of ~3, each a few ulps off. */
    private static final double LOSS_TOL = 1e-5;

    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    /** Random parameters with O(1) spread so that every nonlinearity is exercised (float-representable). */
    static float[] randomParams(GptConfig c, long seed) {
        Random r = new Random(seed);
        ParameterLayout layout = new ParameterLayout(c);
        float[] p = new float[(int) layout.count()];
        for (Span t : layout.tensors()) {
            boolean gain = t.param() == Param.LN1W || t.param() == Param.LN2W || t.param() == Param.LNFW;
            for (long i = 0; i < t.count(); i++) {
                p[(int) (t.offset() + i)] = (float) ((gain ? 1 : 0) + 0.5 * r.nextGaussian());
            }
        }
        return p;
    }

    static int[] randomTokens(int n, int V, Random r) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(V);
        }
        return t;
    }

    static double[] widen(float[] f) {
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            d[i] = f[i];
        }
        return d;
    }

    static void setParams(Gpt2 m, float[] p) {
        MemorySegment.copy(p, 0, m.params(), F32, 0, p.length);
    }

    static float[] toArray(MemorySegment s, long n) {
        float[] a = new float[(int) n];
        MemorySegment.copy(s, F32, 0, a, 0, a.length);
        return a;
    }

    @Test
    void referenceGradientMatchesFiniteDifferences() {
        Random r = new Random(SEED);
        Gpt2Ref ref = new Gpt2Ref(TINY);
        double[] params = widen(randomParams(TINY, SEED));
        int[] inp = randomTokens(B * T, TINY.V(), r), tgt = randomTokens(B * T, TINY.V(), r);
        double[] grads = ref.lossAndGrads(params, inp, tgt, B, T).grads();
        ParameterLayout layout = new ParameterLayout(TINY);
        for (Span t : layout.tensors()) {
            for (int k = 0; k < 6; k++) {
                long i = t.offset() + (k == 0 ? 0 : k == 1 ? t.count() - 1 : (long) r.nextInt((int) t.count()));
                double saved = params[(int) i];
                params[(int) i] = saved + FD_STEP;
                double plus = ref.loss(params, inp, tgt, B, T);
                params[(int) i] = saved - FD_STEP;
                double minus = ref.loss(params, inp, tgt, B, T);
                params[(int) i] = saved;
                double fd = (plus - minus) / (2 * FD_STEP);
                assertThat(grads[(int) i]).as("d loss / d %s[%d] (seed %d)", t.param().fileName(), i - t.offset(), SEED)
                        .isCloseTo(fd, offset(FD_ABS + FD_REL * Math.abs(fd)));
            }
        }
        // the gradient is not trivially small: the check above has something to check
        assertThat(ReferenceMath.maxAbs(grads)).isGreaterThan(1e-2);
    }

    @Test
    void fastModelMatchesTheReference() {
        Random r = new Random(SEED + 1);
        float[] p = randomParams(TINY, SEED + 1);
        int[] inp = randomTokens(B * T, TINY.V(), r), tgt = randomTokens(B * T, TINY.V(), r);
        Gpt2Ref.Result expected = new Gpt2Ref(TINY).lossAndGrads(widen(p), inp, tgt, B, T);
        try (Gpt2 m = new Gpt2(TINY, ops, 3, 7)) { // larger than the batch: the packed layout at B·T < maxB·maxT
            setParams(m, p);
            m.zeroGrad();
            double forwardLoss = m.forward(MemorySegment.ofArray(inp), MemorySegment.ofArray(tgt), B, T);
            float[] logits = toArray(m.logits(), (long) B * T * TINY.Vp());
            double loss = m.backward(1f / (B * T));
            assertThat(forwardLoss).isEqualTo(loss);
            assertThat(loss).as("loss (seed %d)", SEED + 1).isCloseTo(expected.loss(),
                    offset(LOSS_TOL * expected.loss()));
            for (int i = 0; i < logits.length; i++) {
                assertThat((double) logits[i]).as("logits[%d]", i).isCloseTo(expected.logits()[i],
                        offset(FAST_REL * ReferenceMath.maxAbs(expected.logits())));
            }
            assertGradsClose(m, expected.grads(), "seed " + (SEED + 1));
        }
    }

    /** Every gradient tensor of {@code m} against {@code expected}, relative to the tensor's largest element. */
    static void assertGradsClose(Gpt2 m, double[] expected, String what) {
        float[] g = toArray(m.grads(), m.layout().count());
        for (Span t : m.layout().tensors()) {
            double scale = 0;
            for (long i = 0; i < t.count(); i++) {
                scale = Math.max(scale, Math.abs(expected[(int) (t.offset() + i)]));
            }
            for (long i = 0; i < t.count(); i++) {
                int k = (int) (t.offset() + i);
                assertThat((double) g[k]).as("grad %s[%d] (%s)", t.param().fileName(), i, what)
                        .isCloseTo(expected[k], offset(FAST_REL * scale + 1e-12));
            }
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCountAndForwardBackwardIsForwardThenBackward() {
        Random r = new Random(SEED + 2);
        float[] p = randomParams(TINY, SEED + 2);
        int[] inp = randomTokens(B * T, TINY.V(), r), tgt = randomTokens(B * T, TINY.V(), r);
        float[] g1;
        double loss1;
        try (Parallel one = new Parallel(1); Gpt2 m = new Gpt2(TINY, new CpuOps(one), B, T)) {
            setParams(m, p);
            m.zeroGrad();
            m.forward(MemorySegment.ofArray(inp), MemorySegment.ofArray(tgt), B, T);
            loss1 = m.backward(0.1f);
            g1 = toArray(m.grads(), m.layout().count());
        }
        try (Parallel three = new Parallel(3); Gpt2 m = new Gpt2(TINY, new CpuOps(three), B, T)) {
            setParams(m, p);
            m.zeroGrad();
            double loss3 = m.forwardBackward(MemorySegment.ofArray(inp), MemorySegment.ofArray(tgt), B, T, 0.1f);
            assertThat(loss3).isEqualTo(loss1);
            assertThat(toArray(m.grads(), m.layout().count())).containsExactly(g1);
        }
    }

    @Test
    void paddedVocabularyRowsNeverMatter() {
        Random r = new Random(SEED + 3);
        float[] p = randomParams(TINY, SEED + 3);
        ParameterLayout layout = new ParameterLayout(TINY);
        int padStart = (int) layout.offset(Param.WTE) + TINY.V() * TINY.C();
        int padEnd = (int) layout.offset(Param.WTE) + TINY.Vp() * TINY.C();
        int[] inp = randomTokens(B * T, TINY.V(), r), tgt = randomTokens(B * T, TINY.V(), r);
        float[] zeroPad = p.clone(), junkPad = p.clone();
        for (int i = padStart; i < padEnd; i++) {
            zeroPad[i] = 0;
            junkPad[i] = (float) (1e3 * r.nextGaussian());
        }
        float[][] grads = new float[2][];
        double[] losses = new double[2];
        for (int k = 0; k < 2; k++) {
            try (Gpt2 m = new Gpt2(TINY, ops, B, T)) {
                setParams(m, k == 0 ? zeroPad : junkPad);
                m.zeroGrad();
                losses[k] = m.forwardBackward(MemorySegment.ofArray(inp), MemorySegment.ofArray(tgt), B, T, 0.1f);
                grads[k] = toArray(m.grads(), layout.count());
            }
        }
        assertThat(losses[1]).isEqualTo(losses[0]);
        assertThat(grads[1]).containsExactly(grads[0]);
        for (int i = padStart; i < padEnd; i++) {
            assertThat(grads[0][i]).as("gradient of padded wte element %d", i - padStart).isZero();
        }
    }

    @Test
    void badTokensAndSizesAreClearErrors() {
        try (Gpt2 m = new Gpt2(TINY, ops, B, T)) {
            int[] inp = new int[B * T];
            inp[7] = TINY.V();
            assertThatThrownBy(() -> m.forward(MemorySegment.ofArray(inp), null, B, T))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("inputs[b=1, t=2] is token 11, outside the model's vocabulary [0, 11)");
            int[] tgt = new int[B * T];
            tgt[0] = -1;
            assertThatThrownBy(() -> m.forward(MemorySegment.ofArray(new int[B * T]), MemorySegment.ofArray(tgt), B,
                    T)).hasMessageContaining("targets[b=0, t=0] is token -1");
            assertThatThrownBy(() -> m.forward(MemorySegment.ofArray(new int[B * T]), null, B, T + 1))
                    .hasMessageContaining("T in [1, 5]");
            assertThatThrownBy(() -> m.backward(1f)).isInstanceOf(IllegalStateException.class);
        }
        assertThatThrownBy(() -> new Gpt2(TINY, ops, 1, TINY.maxT() + 1)).hasMessageContaining("maxT in [1, 8]");
    }

    @Test
    void byteAccountingIsExact() {
        int maxB = 2, maxT = 8; // 16 positions: every region is a whole number of 64-byte lines, no rounding
        try (Gpt2 m = new Gpt2(TINY, ops, maxB, maxT)) {
            long C = TINY.C(), L = TINY.L(), NH = TINY.NH();
            // a block keeps ln_1's out and statistics, qkv, atty, lse, attn's out, residual2, ln_2's out and
            // statistics, the MLP's pre-activation and GELU, the MLP's out; its output (the next residual) is its
            // parent's
            long perLayer = C + 2 + 3 * C + C + NH + C + C + C + 2 + 4 * C + 4 * C + C;
            // the top sequence: the embedding's out, the blocks' last out, ln_f's out, two gradient buffers; the
            // blocks' other outputs; ln_f's statistics; the scratch every block shares: dln, dqkv, datty, dpre
            long perPosition = 5 * C + (L - 1) * C + L * perLayer + 2 + C + 3 * C + C + 4 * C + TINY.Vp() + 1;
            long tokens = 2L * maxB * maxT * Integer.BYTES;
            assertThat(m.parameterBytes()).isEqualTo(TINY.parameterCount() * 4);
            assertThat(m.params().byteSize()).isEqualTo(m.parameterBytes());
            assertThat(m.grads().byteSize()).isEqualTo(m.parameterBytes());
            assertThat(m.activationBytes()).isEqualTo(maxB * maxT * perPosition * Float.BYTES + tokens);
            assertThat(Gpt2.activationBytes(TINY, maxB, maxT, Recompute.NONE)).isEqualTo(m.activationBytes());
            assertThat(m.totalBytes()).isEqualTo(2 * m.parameterBytes() + m.activationBytes());
        }
    }

    /** Small helpers on double arrays. */
    static final class ReferenceMath {
        static double maxAbs(double[] a) {
            double m = 0;
            for (double x : a) {
                m = Math.max(m, Math.abs(x));
            }
            return m;
        }
    }
}
