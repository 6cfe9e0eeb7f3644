package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.cpu.ref.LionRef;
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
 * {@link Lion} against {@link LionRef} step by step, the sign of zero and of NaN, sharding and thread-count
 * invariance, the multi-range call, argument errors.
 *
 * <p>Tolerance, per element, a first-order bound on the kernel's fp32 roundings (each ≤ u = 2⁻²⁴ relative) from the
 * reference's own values; each step starts both from the kernel's fp32 state, so errors do not compound. With
 * s = gradScale:
 * <ul>
 *   <li>c = β1·m₀ + (1−β1)·s·grad: s·grad, 1−β1, the two products and the sum are rounded:
 *       Δc ≤ 4u·(β1|m₀| + (1−β1)|s·grad|) (a bound on cancellation too). Where |c| ≤ Δc the kernel's sign may differ
 *       from the reference's; there p may be the update of any sign (such elements are counted; random inputs give
 *       next to none).</li>
 *   <li>m: the same with β2: Δm ≤ 4u·(β2|m₀| + (1−β2)|s·grad|).</li>
 *   <li>p₁ = p₀·decay − lr·sign(c): decay = 1 − lr·λ is rounded once (u), the product (u), lr·sign is exact, the
 *       difference (u): Δp ≤ 2u·decay·|p₀| + u·|p₁|.</li>
 * </ul>
 * The u² terms left out are 2⁻²⁴ times smaller than the bound ({@link SgdTest#SLACK} covers them).
 */
class LionTest {

    static final double U = 0x1p-24;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** fp32 state of n parameters, in segments, with a random start. */
    static final class State {
        final int n;
        final MemorySegment p, g, m;

        State(Arena arena, SplittableRandom rnd, int n) {
            this.n = n;
            p = Buffers.floats(arena, Buffers.uniform(rnd, n, 1));
            g = Buffers.floats(arena, new double[n]);
            m = Buffers.floats(arena, Buffers.uniform(rnd, n, 0.05));
        }

        void newGrads(SplittableRandom rnd) {
            g.copyFrom(Buffers.floats(Arena.ofAuto(), Buffers.uniform(rnd, n, 0.1)));
        }

        byte[] bytes() {
            return AdamWTest.concat(p, m);
        }
    }

    /** The largest error/bound ratio seen, per quantity, and the elements whose sign was within rounding of 0. */
    static final class Worst {
        double p, m;
        long nearZero;
    }

    @ParameterizedTest(name = "n={0} beta1={1} beta2={2} wd={3} gradScale={4} lr={5}")
    @CsvSource({"1,0.9,0.99,0,1,1e-4", "7,0.9,0.99,1,0.5,3e-4", "1003,0.95,0.98,0.1,2.5,1e-3",
            "20011,0.9,0.99,0.3,1,1e-4", "65613,0.5,0.999,0.01,0.8,1e-2", "196619,0.9,0.99,3,0.37,1e-4"})
    void fastMatchesReferenceStepByStep(int n, float beta1, float beta2, float wd, float gradScale, float lr) {
        long seed = n * 137L + (long) (wd * 1000);
        SplittableRandom rnd = new SplittableRandom(seed);
        LionConfig config = new LionConfig(lr, beta1, beta2, wd);
        Worst worst = new Worst();
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, rnd, n);
            for (int t = 1; t <= 5; t++) {
                s.newGrads(rnd);
                double[] p = Buffers.read(s.p, n), g = Buffers.read(s.g, n), m = Buffers.read(s.m, n);
                double[] p0 = p.clone(), m0 = m.clone();
                double[] c = LionRef.update(p, g, m, config, gradScale);
                Lion.update(POOLS.three(), s.p, s.g, s.m, 7, n, config, gradScale);
                String what = "n=" + n + " step " + t + " seed=" + seed;
                check(what, config, gradScale, p0, g, m0, c, p, m, Buffers.read(s.p, n), Buffers.read(s.m, n), worst);
            }
        }
        System.out.printf("LionTest n=%d beta1=%s beta2=%s wd=%s: worst error/bound p %.3f, m %.3f; %d signs within "
                + "rounding of 0%n", n, beta1, beta2, wd, worst.p, worst.m, worst.nearZero);
    }

    /** Every element within the bound of the class comment. */
    static void check(String what, LionConfig k, double gradScale, double[] p0, double[] grads, double[] m0,
                      double[] cRef, double[] pRef, double[] mRef, double[] p, double[] m, Worst worst) {
        double b1 = k.beta1(), b2 = k.beta2(), lr = k.lr(), decay = 1 - (double) k.lr() * k.weightDecay();
        for (int i = 0; i < p.length; i++) {
            double sg = Math.abs(gradScale * grads[i]);
            double dc = 4 * U * (b1 * Math.abs(m0[i]) + (1 - b1) * sg);
            double dm = 4 * U * (b2 * Math.abs(m0[i]) + (1 - b2) * sg);
            double dp = 2 * U * decay * Math.abs(p0[i]) + U * Math.abs(pRef[i]);
            worst.m = Math.max(worst.m, SgdTest.within(what, "m", i, m[i], mRef[i], dm));
            double expected = pRef[i];
            if (Math.abs(cRef[i]) <= dc) { // the kernel's c may have either sign, or be 0: take the nearest update
                worst.nearZero++;
                for (double sign : new double[] {-1, 0, 1}) {
                    double candidate = p0[i] * decay - lr * sign;
                    if (Math.abs(p[i] - candidate) < Math.abs(p[i] - expected)) {
                        expected = candidate;
                    }
                }
            }
            worst.p = Math.max(worst.p, SgdTest.within(what, "p (c = " + cRef[i] + ")", i, p[i], expected, dp));
        }
    }

    /** c = 0 exactly (m = 0, grad = 0) leaves only the decay; a NaN gradient makes p and m NaN, as in PyTorch. */
    @Test
    void signOfZeroIsZeroAndNaNPropagates() {
        int n = 45; // vector lanes and the scalar tail
        LionConfig config = new LionConfig(1e-2f, 0.9f, 0.99f, 0.5f);
        float decay = config.decayFactor();
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(17), n);
            double[] p0 = Buffers.read(s.p, n);
            for (int i = 0; i < n; i++) {
                s.m.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, i % 3 == 0 ? 0f : i % 3 == 1 ? -0f : 1e-3f);
                s.g.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, i % 3 == 2 ? Float.NaN : i % 2 == 0 ? 0f : -0f);
            }
            Lion.update(POOLS.one(), s.p, s.g, s.m, 0, n, config, 1f);
            for (int i = 0; i < n; i++) {
                float p = s.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                float m = s.m.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                if (i % 3 == 2) {
                    assertThat(p).as("p[%d] after a NaN gradient", i).isNaN();
                    assertThat(m).as("m[%d] after a NaN gradient", i).isNaN();
                } else {
                    assertThat(p).as("p[%d] with c = 0", i).isEqualTo((float) p0[i] * decay);
                    assertThat(Math.abs(m)).as("m[%d]", i).isEqualTo(0f);
                }
            }
        }
    }

    @Test
    void shardingGivesTheSameBits() {
        int n = 5003, k = 517; // k is no multiple of any vector width
        LionConfig config = new LionConfig(1e-3f, 0.9f, 0.99f, 0.1f);
        try (Arena arena = Arena.ofShared()) {
            State whole = new State(arena, new SplittableRandom(5), n);
            State split = new State(arena, new SplittableRandom(5), n);
            for (int t = 1; t <= 3; t++) {
                whole.newGrads(new SplittableRandom(6 + t));
                split.newGrads(new SplittableRandom(6 + t));
                Lion.update(POOLS.three(), whole.p, whole.g, whole.m, 0, n, config, 0.7f);
                Lion.update(POOLS.one(), split.p, split.g, split.m, 0, k, config, 0.7f);
                Lion.update(POOLS.three(), split.p.asSlice(4L * k), split.g.asSlice(4L * k), split.m.asSlice(4L * k),
                        k, n - k, config, 0.7f);
            }
            assertThat(split.bytes()).as("[0,%d) + [%d,%d) vs [0,%d)", k, k, n, n).isEqualTo(whole.bytes());
        }
    }

    @Test
    void resultsDoNotDependOnTheThreadCount() {
        int n = 3 * Lion.CHUNK + 11;
        LionConfig config = new LionConfig(1e-4f, 0.9f, 0.99f, 1f);
        try (Arena arena = Arena.ofShared()) {
            State a = new State(arena, new SplittableRandom(3), n);
            State b = new State(arena, new SplittableRandom(3), n);
            for (int t = 1; t <= 2; t++) {
                a.newGrads(new SplittableRandom(4 + t));
                b.newGrads(new SplittableRandom(4 + t));
                Lion.update(POOLS.one(), a.p, a.g, a.m, 0, n, config, 1f);
                Lion.update(POOLS.three(), b.p, b.g, b.m, 0, n, config, 1f);
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
        LionConfig config = new LionConfig(1e-3f, 0.9f, 0.99f, 1f);
        CpuOps ops = new CpuOps(POOLS.three());
        try (Arena arena = Arena.ofShared()) {
            State a = new State(arena, new SplittableRandom(21), n);
            State b = new State(arena, new SplittableRandom(21), n);
            for (int t = 1; t <= 2; t++) {
                a.newGrads(new SplittableRandom(22 + t));
                b.newGrads(new SplittableRandom(22 + t));
                ops.lion(a.p, a.g, a.m, ranges, config, 0.5f);
                for (AdamWRange r : ranges) {
                    long at = 4 * r.start(), bytes = 4 * r.length();
                    Lion.update(POOLS.one(), b.p.asSlice(at, bytes), b.g.asSlice(at, bytes), b.m.asSlice(at, bytes),
                            r.offset(), r.length(), r.decays() ? config : config.withWeightDecay(0), 0.5f);
                }
            }
            assertThat(a.bytes()).as("multi-range vs one call per range").isEqualTo(b.bytes());
            State start = new State(arena, new SplittableRandom(21), n);
            for (int gap : new int[] {4050, 8999}) {
                assertThat(a.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, gap)).as("p[%d], a gap", gap)
                        .isEqualTo(start.p.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, gap));
                assertThat(a.m.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, gap)).as("m[%d], a gap", gap)
                        .isEqualTo(start.m.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, gap));
            }
        }
    }

    @Test
    void argumentErrors() {
        LionConfig c = new LionConfig(1e-4f, 0.9f, 0.99f, 0f);
        int n = 10;
        try (Arena arena = Arena.ofShared()) {
            State s = new State(arena, new SplittableRandom(1), n);
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.m, -1, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offset");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.m, 0, -1, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("length");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.m, 0, n, c, Float.NaN))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("gradScale");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p.asSlice(4), s.g, s.m, 0, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params holds 9 floats, 10");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g.asSlice(4), s.m, 0, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("grads holds");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.m.asSlice(4), 0, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("m holds");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.p, 0, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("m overlaps params");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.g, 0, n, c, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("m overlaps grads");
            assertThatThrownBy(() -> Lion.update(POOLS.one(), s.p, s.g, s.m, 0, n, null, 1f))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("config");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment p = confined.allocate(4L * n);
                assertThatThrownBy(() -> Lion.update(POOLS.three(), p, s.g, s.m, 0, n, c, 1f))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params belongs");
            }
            Lion.update(POOLS.one(), s.p, s.g, s.m, 0, 0, c, 1f); // an empty range is fine
        }
    }
}
