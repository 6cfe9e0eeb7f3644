package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cpu.ref.SgdRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Pools;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link Sgd} against {@link SgdRef} step by step (plain, momentum with and without dampening, Nesterov, weight
 * decay), the first-step rule, sharding and thread-count invariance, the multi-range call, argument errors.
 *
 * <p>Tolerance, per element, a first-order bound on the kernel's fp32 roundings (each ≤ u = 2⁻²⁴ relative) from
 * the reference's own values; each step starts both from the kernel's fp32 state, so errors do not compound. With
 * s = gradScale, μ, τ, λ, and A = |s·grad| + λ|p₀| (≥ |g|):
 * <ul>
 *   <li>g = s·grad + λ·p₀: three roundings (the two products, the sum): Δg ≤ 2u·A.</li>
 *   <li>buf: step 1 copies g, Δbuf = Δg; later μ·buf₀ (u), 1−τ (u), its product with g (u, plus Δg) and the sum
 *       (u): Δbuf ≤ 2u·μ|buf₀| + (1−τ)·(Δg + 3u·A).</li>
 *   <li>d: buf (Δd = Δbuf), or with Nesterov g + μ·buf (the product u, the sum u): Δd ≤ Δg + μ·Δbuf + u·μ|buf| +
 *       u·|d|; without momentum d = g.</li>
 *   <li>p₁ = p₀ − lr·d: Δp ≤ lr·(Δd + u·|d|) + u·|p₁|.</li>
 * </ul>
 * The u² terms left out are 2⁻²⁴ times smaller than the bound: {@link #SLACK} covers them (the final rounding alone
 * can reach u·|p₁| when p₁ lies just above a power of two, so the bound is nearly attained: see the printed ratios).
 */
class SgdTest {

    static final double U = 0x1p-24;
    /** The bounds are first order in u; this factor covers the O(u²) rest. */
    static final double SLACK = 1 + 0x1p-20;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** fp32 state of n parameters, in segments, with a random start and a NaN-poisoned momentum buffer. */
    static final class State {
        final int n;
        final MemorySegment p, g, buf;

        State(Arena arena, SplittableRandom rnd, int n) {
            this.n = n;
            p = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            g = Buffers.floats(arena, new double[n]);
            buf = Buffers.poisoned(arena, n); // step 1 must not read it
        }

        void newGrads(SplittableRandom rnd) {
            g.copyFrom(Buffers.floats(Arena.ofAuto(), Buffers.uniform(rnd, n, 1)));
        }

        byte[] bytes() {
            return AdamWTest.concat(p, buf);
        }
    }

    /** The largest error/bound ratio seen, per quantity (printed: the measured errors in the report). */
    static final class Worst {
        double p, buf;
    }

    @ParameterizedTest(name = "n={0} momentum={1} dampening={2} wd={3} nesterov={4} gradScale={5} lr={6}")
    @CsvSource({"1,0.9,0,0,false,1,1e-2", "7,0,0,0.1,false,0.5,1e-1", "1003,0.9,0,0.01,true,2.5,1e-2",
            "1003,0.9,0.1,0.001,false,0.37,3e-2", "20011,0.5,0.5,0,false,1,1e-1", "65613,0.99,0,0.1,true,0.8,1e-3",
            "196619,0.9,0,0.0005,false,1,1e-2"})
    void fastMatchesReferenceStepByStep(int n, float momentum, float dampening, float wd, boolean nesterov,
                                        float gradScale, float lr) {
        long seed = n * 131L + (nesterov ? 1 : 0) + (long) (dampening * 1000);
        SplittableRandom rnd = new SplittableRandom(seed);
        SgdConfig config = new SgdConfig(lr, momentum, dampening, wd, nesterov);
        Worst worst = new Worst();
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, rnd, n);
            for (int t = 1; t <= 5; t++) {
                s.newGrads(rnd);
                double[] p = Buffers.read(s.p, n), g = Buffers.read(s.g, n), buf = Buffers.read(s.buf, n);
                double[] p0 = p.clone(), buf0 = buf.clone();
                SgdRef.update(p, g, buf, config, t, gradScale);
                Sgd.update(POOLS.three(), s.p, s.g, s.buf, 99, n, config, t, gradScale);
                String what = "n=" + n + " step " + t + " seed=" + seed;
                check(what, config, t, gradScale, p0, g, buf0, p, buf, Buffers.read(s.p, n), Buffers.read(s.buf, n),
                        worst);
                if (momentum == 0) {
                    for (int i = 0; i < n; i++) {
                        assertThat(s.buf.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i))
                                .as("%s: buf[%d] without momentum is not written", what, i).isNaN();
                    }
                }
            }
        }
        System.out.printf("SgdTest n=%d momentum=%s dampening=%s nesterov=%s: worst error/bound p %.3f, buf %.3f%n",
                n, momentum, dampening, nesterov, worst.p, worst.buf);
    }

    /** Every element within the bound of the class comment. */
    static void check(String what, SgdConfig c, int t, double gradScale, double[] p0, double[] grads, double[] buf0,
                      double[] pRef, double[] bufRef, double[] p, double[] buf, Worst worst) {
        double mu = c.momentum(), tau = c.dampening(), wd = c.weightDecay(), lr = c.lr();
        for (int i = 0; i < p.length; i++) {
            double a = Math.abs(gradScale * grads[i]) + wd * Math.abs(p0[i]);
            double g = gradScale * grads[i] + wd * p0[i];
            double dg = 2 * U * a, dd = dg, d = g;
            if (mu != 0) {
                double db = t == 1 ? dg : 2 * U * mu * Math.abs(buf0[i]) + (1 - tau) * (dg + 3 * U * a);
                worst.buf = Math.max(worst.buf, within(what, "buf", i, buf[i], bufRef[i], db));
                if (c.nesterov()) {
                    d = g + mu * bufRef[i];
                    dd = dg + mu * db + U * mu * Math.abs(bufRef[i]) + U * Math.abs(d);
                } else {
                    d = bufRef[i];
                    dd = db;
                }
            }
            double dp = lr * (dd + U * Math.abs(d)) + U * Math.abs(pRef[i]);
            worst.p = Math.max(worst.p, within(what, "p", i, p[i], pRef[i], dp));
        }
    }

    /** Fails unless |got − expected| ≤ bound; returns the error over the bound (0 when both are 0). */
    static double within(String what, String name, int i, double got, double expected, double bound) {
        double err = Math.abs(got - expected);
        if (!(err <= bound * SLACK)) {
            fail("%s: %s[%d] = %s, expected %s (error %.3g > bound %.3g)", what, name, i, got, expected, err, bound);
        }
        return err == 0 ? 0 : err / bound;
    }

    @Test
    void firstStepSetsTheBufferToTheGradientUndamped() {
        int n = 37;
        SgdConfig config = new SgdConfig(0.5f, 0.9f, 0.5f, 0f, false);
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(12), n);
            s.newGrads(new SplittableRandom(13));
            double[] p0 = Buffers.read(s.p, n), g = Buffers.read(s.g, n);
            Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, n, config, 1, 2f);
            for (int i = 0; i < n; i++) {
                float gi = (float) g[i] * 2f;
                assertThat(s.buf.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i)).as("buf[%d]", i).isEqualTo(gi);
                assertThat(s.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i)).as("p[%d]", i)
                        .isEqualTo((float) p0[i] - gi * 0.5f);
            }
        }
    }

    @Test
    void shardingGivesTheSameBits() {
        int n = 5003, k = 517; // k is no multiple of any vector width
        SgdConfig config = new SgdConfig(1e-2f, 0.9f, 0f, 0.1f, true);
        try (Arena arena = Arena.ofShared()) {
            State whole = new State(arena, new SplittableRandom(5), n);
            State split = new State(arena, new SplittableRandom(5), n);
            for (int t = 1; t <= 3; t++) {
                whole.newGrads(new SplittableRandom(6 + t));
                split.newGrads(new SplittableRandom(6 + t));
                Sgd.update(POOLS.three(), whole.p, whole.g, whole.buf, 0, n, config, t, 0.7f);
                Sgd.update(POOLS.one(), split.p, split.g, split.buf, 0, k, config, t, 0.7f);
                Sgd.update(POOLS.three(), split.p.asSlice(4L * k), split.g.asSlice(4L * k), split.buf.asSlice(4L * k),
                        k, n - k, config, t, 0.7f);
            }
            assertThat(split.bytes()).as("[0,%d) + [%d,%d) vs [0,%d)", k, k, n, n).isEqualTo(whole.bytes());
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCount() {
        int n = 3 * Sgd.CHUNK + 11;
        SgdConfig config = new SgdConfig(1e-3f, 0.9f, 0.1f, 0.01f, false);
        try (Arena arena = Arena.ofShared()) {
            State a = new State(arena, new SplittableRandom(3), n);
            State b = new State(arena, new SplittableRandom(3), n);
            for (int t = 1; t <= 2; t++) {
                a.newGrads(new SplittableRandom(4 + t));
                b.newGrads(new SplittableRandom(4 + t));
                Sgd.update(POOLS.one(), a.p, a.g, a.buf, 0, n, config, t, 1f);
                Sgd.update(POOLS.three(), b.p, b.g, b.buf, 0, n, config, t, 1f);
            }
            assertThat(b.bytes()).as("3 threads vs 1 (seed 3)").isEqualTo(a.bytes());
        }
    }

    /** The multi-range default through CpuOps: one call per range, no decay where a row says so, gaps untouched. */
    @Test
    void rangesAreOneCallEach() {
        int n = 9000;
        List<AdamWRange> ranges = List.of(new AdamWRange(0, 0, 4001, true), new AdamWRange(4001, 4001, 3, false),
                new AdamWRange(4100, 4100, 2345, true), new AdamWRange(6445, 6445, 0, false),
                new AdamWRange(7000, 7000, 1999, false));
        SgdConfig config = new SgdConfig(1e-2f, 0.9f, 0f, 0.1f, true);
        CpuOps ops = new CpuOps(POOLS.three());
        try (Arena arena = Arena.ofShared()) {
            State a = new State(arena, new SplittableRandom(21), n);
            State b = new State(arena, new SplittableRandom(21), n);
            for (int t = 1; t <= 2; t++) {
                a.newGrads(new SplittableRandom(22 + t));
                b.newGrads(new SplittableRandom(22 + t));
                ops.sgd(a.p, a.g, a.buf, ranges, config, t, 0.5f);
                for (AdamWRange r : ranges) {
                    long at = 4 * r.start(), bytes = 4 * r.length();
                    Sgd.update(POOLS.one(), b.p.asSlice(at, bytes), b.g.asSlice(at, bytes), b.buf.asSlice(at, bytes),
                            r.offset(), r.length(), r.decays() ? config : config.withWeightDecay(0), t, 0.5f);
                }
            }
            assertThat(a.bytes()).as("multi-range vs one call per range").isEqualTo(b.bytes());
            double[] p0 = Buffers.read(new State(arena, new SplittableRandom(21), n).p, n);
            assertThat((double) a.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 4050)).as("gap").isEqualTo(p0[4050]);
            assertThat(a.buf.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 8999)).as("gap's buf").isNaN();
        }
    }

    @Test
    void withoutMomentumTheBufferMayBeNull() {
        int n = 19;
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(31), n);
            s.newGrads(new SplittableRandom(32));
            double[] p = Buffers.read(s.p, n), g = Buffers.read(s.g, n);
            SgdConfig plain = new SgdConfig(0.1f, 0f, 0.3f, 0.01f, false);
            Sgd.update(POOLS.three(), s.p, s.g, MemorySegment.NULL, 0, n, plain, 4, 1f);
            new CpuOps(POOLS.one()).sgd(s.p, s.g, MemorySegment.NULL, List.of(new AdamWRange(0, 0, n, true)), plain,
                    5, 1f);
            for (int i = 0; i < n; i++) { // twice p −= lr·(g + λp), dampening ignored as PyTorch does
                for (int t = 0; t < 2; t++) {
                    float pi = (float) p[i];
                    p[i] = pi - ((float) g[i] * 1f + pi * 0.01f) * 0.1f;
                }
                assertThat((double) s.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i)).as("p[%d]", i)
                        .isEqualTo(p[i]);
            }
        }
    }

    @Test
    void argumentErrors() {
        SgdConfig c = new SgdConfig(1e-3f, 0.9f, 0f, 0f, false);
        int n = 10;
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(1), n);
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, n, c, 0, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("step");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf, -1, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offset");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, -1, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("length");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, n, c, 1, Float.POSITIVE_INFINITY))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("gradScale");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p.asSlice(4), s.g, s.buf, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params holds 9 floats, 10");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g.asSlice(4), s.buf, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("grads holds");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf.asSlice(4), 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("buf holds");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.p, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("buf overlaps params");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.p, s.buf, 0, n, c, 1, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params overlaps grads");
            assertThatThrownBy(() -> Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, n, null, 1, 1f))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("config");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment b = confined.allocate(4L * n);
                assertThatThrownBy(() -> Sgd.update(POOLS.three(), s.p, s.g, b, 0, n, c, 1, 1f))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("buf belongs to a confined");
            }
            Sgd.update(POOLS.one(), s.p, s.g, s.buf, 0, 0, c, 1, 1f); // an empty range is fine
        }
    }
}
