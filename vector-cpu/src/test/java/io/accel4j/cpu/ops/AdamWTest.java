package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.ref.AdamWRef;
import io.accel4j.cpu.testing.Buffers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link AdamW} against {@link AdamWRef} step by step, its bf16 copy bit for bit against scalar stochastic rounding,
 * the rounding's unbiasedness, sharding and thread-count invariance, argument errors.
 *
 * <p>Tolerance, per element, from the reference's own values (each step starts both from the kernel's fp32 state,
 * so errors do not compound): u = 2⁻²⁴; g = gradScale·grad.
 * <ul>
 *   <li>m: the kernel rounds g, (1−β1)·g, β1·m and their sum: ≤ 4u·(β1|m₀| + (1−β1)|g|) (a bound on cancellation
 *       too, unlike a relative one).</li>
 *   <li>v: two more roundings for g·g: ≤ 6u·(β2·v₀ + (1−β2)·g²); all terms ≥ 0, so this is ≤ 6u·v relative.</li>
 *   <li>the update U = m̂/(√v̂ + eps): m̂'s error is c1·(m's bound + 2u|m|) (c1 rounded, the product rounded); the
 *       denominator's relative error is ≤ 3u (v) + 3u (c2, product, sqrt) + u (eps add); the division adds u: so
 *       ΔU ≤ (c1·(Δm + 2u|m|) + 8u·|m̂|)/(√v̂ + eps).</li>
 *   <li>p₁ = p₀ − lr·(U + wd·p₀): ≤ lr·(ΔU + 4u·(|U| + wd·|p₀|)) + 2u·|p₁| (wd·p₀, the add, ·lr, the subtraction).</li>
 * </ul>
 */
class AdamWTest {

    static final double U = 0x1p-24;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** fp32 state of n parameters, in segments, with a random start. */
    static final class State {
        final int n;
        final MemorySegment p, g, m, v, bf16;

        State(Arena arena, SplittableRandom rnd, int n) {
            this.n = n;
            p = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            g = Buffers.floats(arena, new double[n]);
            m = Buffers.floats(arena, Buffers.uniform(rnd, n, 0.05));
            double[] v0 = Buffers.uniform(rnd, n, 0.01);
            for (int i = 0; i < n; i++) {
                v0[i] = Math.abs(v0[i]);
            }
            v = Buffers.floats(arena, v0);
            bf16 = arena.allocate(2L * n, 64);
        }

        void newGrads(SplittableRandom rnd) {
            g.copyFrom(Buffers.floats(Arena.ofAuto(), Buffers.uniform(rnd, n, 1)));
        }

        byte[] bytes() {
            return concat(p, m, v, bf16);
        }
    }

    static byte[] concat(MemorySegment... segments) {
        long total = 0;
        for (MemorySegment s : segments) {
            total += s.byteSize();
        }
        byte[] out = new byte[(int) total];
        int at = 0;
        for (MemorySegment s : segments) {
            MemorySegment.copy(s, ValueLayout.JAVA_BYTE, 0, out, at, (int) s.byteSize());
            at += (int) s.byteSize();
        }
        return out;
    }

    @ParameterizedTest(name = "n={0} wd={1} gradScale={2} lr={3} bf16={4}")
    @CsvSource({"1,0,1,1e-3,false", "7,0.1,0.5,1e-2,false", "1003,0,2.5,1e-3,false", "1003,0.1,0.37,3e-4,true",
            "20011,0.01,1,1e-3,false", "65613,0.1,0.8,1e-2,true"})
    void fastMatchesReferenceStepByStep(int n, float wd, float gradScale, float lr, boolean bf16) {
        long seed = n * 131L + (bf16 ? 1 : 0);
        SplittableRandom rnd = new SplittableRandom(seed);
        AdamWConfig config = new AdamWConfig(lr, 0.9f, 0.999f, 1e-8f, wd);
        long offset = 12345;
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, rnd, n);
            for (int t = 1; t <= 5; t++) {
                s.newGrads(rnd);
                double[] p = Buffers.read(s.p, n), g = Buffers.read(s.g, n);
                double[] m = Buffers.read(s.m, n), v = Buffers.read(s.v, n);
                double[] p0 = p.clone(), m0 = m.clone(), v0 = v.clone();
                AdamWRef.update(p, g, m, v, config, t, gradScale);
                long rngSeed = seed * 1000 + t;
                if (bf16) {
                    AdamW.updateBf16(POOLS.three(), s.bf16, s.p, s.g, s.m, s.v, offset, n, config, t, gradScale, rngSeed);
                } else {
                    AdamW.update(POOLS.three(), s.p, s.g, s.m, s.v, offset, n, config, t, gradScale);
                }
                String what = "n=" + n + " step " + t + " seed=" + seed;
                check(what, config, t, gradScale, p0, g, m0, v0, p, m, v, Buffers.read(s.p, n),
                        Buffers.read(s.m, n), Buffers.read(s.v, n));
                if (bf16) {
                    short[] expected = AdamWRef.roundBf16Stochastic(Buffers.read(s.p, n), offset, rngSeed);
                    for (int i = 0; i < n; i++) {
                        short got = s.bf16.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i);
                        if (got != expected[i]) {
                            fail("%s: bf16[%d] = 0x%04x, scalar stochastic rounding of master %s gives 0x%04x", what,
                                    i, got, Buffers.read(s.p, n)[i], expected[i]);
                        }
                    }
                }
            }
        }
    }

    /** Every element within the bound of the class comment. */
    static void check(String what, AdamWConfig c, int t, double gradScale, double[] p0, double[] grads, double[] m0,
                      double[] v0, double[] pRef, double[] mRef, double[] vRef, double[] p, double[] m, double[] v) {
        double b1 = c.beta1(), b2 = c.beta2(), lr = c.lr(), wd = c.weightDecay(), eps = c.eps();
        double c1 = 1 / (1 - Math.pow(b1, t)), c2 = 1 / (1 - Math.pow(b2, t));
        for (int i = 0; i < p.length; i++) {
            double g = gradScale * grads[i];
            double dm = 4 * U * (b1 * Math.abs(m0[i]) + (1 - b1) * Math.abs(g));
            double dv = 6 * U * (b2 * v0[i] + (1 - b2) * g * g);
            double den = Math.sqrt(vRef[i] * c2) + eps;
            double mHat = mRef[i] * c1, update = mHat / den;
            double dUpdate = (c1 * (dm + 2 * U * Math.abs(mRef[i])) + 8 * U * Math.abs(mHat)) / den;
            double dp = lr * (dUpdate + 4 * U * (Math.abs(update) + wd * Math.abs(p0[i]))) + 2 * U * Math.abs(pRef[i]);
            within(what, "m", i, m[i], mRef[i], dm);
            within(what, "v", i, v[i], vRef[i], dv);
            within(what, "p", i, p[i], pRef[i], dp);
        }
    }

    static void within(String what, String name, int i, double got, double expected, double bound) {
        if (!(Math.abs(got - expected) <= bound)) {
            fail("%s: %s[%d] = %s, expected %s (error %.3g > bound %.3g)", what, name, i, got, expected,
                    Math.abs(got - expected), bound);
        }
    }

    @Test
    void shardingGivesTheSameBits() {
        int n = 5003, k = 517; // k is no multiple of any vector width
        long offset = 99, rngSeed = 7;
        AdamWConfig config = new AdamWConfig(1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
        for (boolean bf16 : new boolean[] {false, true}) {
            try (Arena arena = Arena.ofShared()) {
                State whole = new State(arena, new SplittableRandom(5), n);
                State split = new State(arena, new SplittableRandom(5), n);
                whole.newGrads(new SplittableRandom(6));
                split.newGrads(new SplittableRandom(6));
                for (int t = 1; t <= 2; t++) {
                    if (bf16) {
                        AdamW.updateBf16(POOLS.three(), whole.bf16, whole.p, whole.g, whole.m, whole.v, offset, n, config, t,
                                0.7f, rngSeed);
                        AdamW.updateBf16(POOLS.one(), split.bf16.asSlice(0, 2L * k), split.p, split.g, split.m, split.v,
                                offset, k, config, t, 0.7f, rngSeed);
                        AdamW.updateBf16(POOLS.three(), split.bf16.asSlice(2L * k), split.p.asSlice(4L * k),
                                split.g.asSlice(4L * k), split.m.asSlice(4L * k), split.v.asSlice(4L * k), offset + k,
                                n - k, config, t, 0.7f, rngSeed);
                    } else {
                        AdamW.update(POOLS.three(), whole.p, whole.g, whole.m, whole.v, offset, n, config, t, 0.7f);
                        AdamW.update(POOLS.one(), split.p, split.g, split.m, split.v, offset, k, config, t, 0.7f);
                        AdamW.update(POOLS.three(), split.p.asSlice(4L * k), split.g.asSlice(4L * k),
                                split.m.asSlice(4L * k), split.v.asSlice(4L * k), offset + k, n - k, config, t, 0.7f);
                    }
                }
                assertThat(split.bytes()).as("[0,%d) + [%d,%d) vs [0,%d), bf16 %s", k, k, n, n, bf16)
                        .isEqualTo(whole.bytes());
            }
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCount() {
        int n = 3 * AdamW.CHUNK + 11;
        AdamWConfig config = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f);
        try (Arena arena = Arena.ofShared()) {
            State a = new State(arena, new SplittableRandom(3), n);
            State b = new State(arena, new SplittableRandom(3), n);
            a.newGrads(new SplittableRandom(4));
            b.newGrads(new SplittableRandom(4));
            AdamW.updateBf16(POOLS.one(), a.bf16, a.p, a.g, a.m, a.v, 0, n, config, 3, 1f, 11);
            AdamW.updateBf16(POOLS.three(), b.bf16, b.p, b.g, b.m, b.v, 0, n, config, 3, 1f, 11);
            assertThat(b.bytes()).as("3 threads vs 1 (seed 3)").isEqualTo(a.bytes());
        }
    }

    @Test
    void specialValuesRoundLikeTheScalarCast() {
        float[] specials = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 3.3e38f, -3.39e38f, 0f, -0f,
                1e-40f, -1e-42f, Float.intBitsToFloat(0x7FC0_0001), Float.intBitsToFloat(0xFF80_0001)};
        int n = 4 * specials.length + 3;
        AdamWConfig config = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(8), n);
            for (int i = 0; i < n; i++) {
                s.p.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, specials[i % specials.length]);
            }
            AdamW.updateBf16(POOLS.one(), s.bf16, s.p, s.g, s.m, s.v, 5, n, config, 1, 1f, 1234);
            for (int i = 0; i < n; i++) {
                float master = s.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                short want = Bf16.fromFloatStochastic(master, CounterRng.bits(1234, 5 + i));
                assertThat(s.bf16.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i))
                        .as("bf16[%d] of master %s (bits 0x%08x)", i, master, Float.floatToRawIntBits(master))
                        .isEqualTo(want);
            }
        }
    }

    /**
     * With lr = 0 the master weights stay as they are, so the bf16 copies of n equal values are n independent
     * stochastic roundings: each is the bf16 below or above x, above with probability f (x's fraction of the gap), so
     * their mean has expectation x and standard deviation gap·√(f(1−f)/n). We allow 6 of those; rounding to nearest
     * would be off by gap·min(f, 1−f), hundreds of them.
     */
    @Test
    void stochasticRoundingIsUnbiased() {
        int n = 100_003;
        float[] values = {1 + 1f / 3 * 0x1p-7f, -2.71828f, 3.0e-3f, 1234.567f, 1e-39f};
        AdamWConfig frozen = new AdamWConfig(0f, 0.9f, 0.999f, 1e-8f, 0f);
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(9), n);
            for (float x : values) {
                for (int i = 0; i < n; i++) {
                    s.p.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, x);
                }
                AdamW.updateBf16(POOLS.three(), s.bf16, s.p, s.g, s.m, s.v, 0, n, frozen, 1, 1f, 77);
                float below = Bf16.toFloat((short) (Float.floatToRawIntBits(x) >>> 16));
                float above = Bf16.toFloat((short) ((Float.floatToRawIntBits(x) >>> 16) + 1));
                double gap = Math.abs((double) above - below), f = Math.abs((double) x - below) / gap;
                double sum = 0;
                for (int i = 0; i < n; i++) {
                    float b = Bf16.toFloat(s.bf16.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i));
                    assertThat(b).as("rounding of %s", x).isIn(below, above);
                    sum += b;
                }
                double sigma = gap * Math.sqrt(f * (1 - f) / n);
                assertThat(Math.abs(sum / n - x)).as("mean of %d roundings of %s (f = %.4f)", n, x, f)
                        .isLessThanOrEqualTo(6 * sigma);
            }
        }
    }

    @Test
    void argumentErrors() {
        AdamWConfig c = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        int n = 10;
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(1), n);
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v, 0, n, c, 0, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("step");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v, -1, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offset");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v, 0, -1, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("length");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v, 0, n, c, 1, Float.NaN))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("gradScale");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p.asSlice(4), s.g, s.m, s.v, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g.asSlice(4), s.m, s.v, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("grads");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v.asSlice(4), 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("v holds");
            assertThatThrownBy(() -> AdamW.update(POOLS.one(), s.p, s.g, s.p, s.v, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
            assertThatThrownBy(() -> AdamW.updateBf16(POOLS.one(), s.bf16.asSlice(2), s.p, s.g, s.m, s.v, 0, n, c, 1, 1f,
                    0)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("paramsBf16");
            assertThatThrownBy(() -> AdamW.updateBf16(POOLS.one(), s.p, s.p, s.g, s.m, s.v, 0, n, c, 1, 1f, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
            assertThatThrownBy(() -> AdamW.updateBf16(POOLS.one(), s.bf16, s.p, s.g, s.m, s.v, 0, n, c, 0, 1f, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("step");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment p = confined.allocate(4L * n);
                assertThatThrownBy(() -> AdamW.update(POOLS.three(), p, s.g, s.m, s.v, 0, n, c, 1, 1f))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params");
            }
            AdamW.update(POOLS.one(), s.p, s.g, s.m, s.v, 0, 0, c, 1, 1f); // an empty range is fine
        }
    }
}
