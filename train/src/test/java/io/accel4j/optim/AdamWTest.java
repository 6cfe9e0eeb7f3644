package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cpu.ref.AdamWRef;
import io.accel4j.nn.Builder;
import io.accel4j.nn.Init;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.Pass;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link AdamW} over a network's parameter groups against the float64 reference ({@link AdamWRef}) applied tensor by
 * tensor with each tensor's decay and learning-rate multiplier, over several steps with fresh gradients.
 */
class AdamWTest {

    /**
     * fp32 update against float64: each step's update is lr·O(1) with a few fp32 roundings (≈ 1e-7 relative) of
     * parameters of O(1); over 4 steps ≤ 1e-6 with a 10× margin.
     */
    private static final double TOL = 1e-5;

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

    /** A module that only declares a tensor with a learning-rate multiplier (identity forward). */
    public record Scaled(String name, float lrScale) implements Module {
        @Override
        public int build(Builder b, int inWidth) {
            b.parameter("w", true, lrScale, Init.zeros(), 7);
            return inWidth;
        }

        @Override
        public void forward(Pass p, MemorySegment in, MemorySegment out) {
            p.memory().copy(in, out);
        }

        @Override
        public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
            p.ops().residualBackward(din, din, dout, 0);
        }
    }

    @Test
    void updatesEachGroupAsTheReferenceDoes() {
        for (boolean decayAll : new boolean[] {false, true}) {
            Module body = new Sequential("net", Linear.of("fc", 3, 5), new LayerNorm("norm", 5),
                    new Scaled("half", 0.5f), Linear.noBias("head", 5, 2));
            try (Network net = Network.of(body).features(3).classes(2).batch(2, 1).build(ops)) {
                ParameterTable table = net.table();
                int n = (int) table.count();
                Random r = new Random(decayAll ? 1 : 2);
                double[] p = new double[n], m = new double[n], v = new double[n];
                float[] pf = new float[n];
                for (int i = 0; i < n; i++) {
                    pf[i] = (float) r.nextGaussian();
                    p[i] = pf[i];
                }
                MemorySegment.copy(pf, 0, net.params(), ValueLayout.JAVA_FLOAT, 0, n);
                AdamW.Spec spec = new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, decayAll);
                try (Optimizer opt = spec.create(ops, table, net.params(), net.grads())) {
                    assertThat(opt.stateBytes()).isEqualTo(2L * 4 * n);
                    for (int t = 1; t <= 4; t++) {
                        float[] g = new float[n];
                        for (int i = 0; i < n; i++) {
                            g[i] = (float) r.nextGaussian();
                        }
                        MemorySegment.copy(g, 0, net.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                        float lr = 0.01f * t, gradScale = 0.75f;
                        opt.step(t, lr, gradScale);
                        for (ParameterTable.Entry e : table.entries()) {
                            int o = (int) e.offset(), c = (int) e.count();
                            double[] pe = slice(p, o, c), me = slice(m, o, c), ve = slice(v, o, c);
                            AdamWConfig cfg = new AdamWConfig(lr * e.lrScale(), 0.9f, 0.95f, 1e-8f,
                                    decayAll || e.decays() ? 0.1f : 0f);
                            double[] ge = new double[c];
                            for (int i = 0; i < c; i++) {
                                ge[i] = g[o + i];
                            }
                            AdamWRef.update(pe, ge, me, ve, cfg, t, gradScale);
                            System.arraycopy(pe, 0, p, o, c);
                            System.arraycopy(me, 0, m, o, c);
                            System.arraycopy(ve, 0, v, o, c);
                        }
                        MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, pf, 0, n);
                        for (int i = 0; i < n; i++) {
                            assertThat((double) pf[i]).as("param %d, step %d, decayAll %s", i, t, decayAll)
                                    .isCloseTo(p[i], within(TOL));
                        }
                    }
                }
            }
        }
    }

    @Test
    void noDecayGroupsAreSpared() {
        Module body = new Sequential("net", Linear.of("fc", 3, 4), new LayerNorm("norm", 4));
        try (Network net = Network.of(body).features(3).classes(2).batch(1, 1).build(ops)) {
            net.initialise(3);
            float[] before = new float[(int) net.table().count()];
            MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, before, 0, before.length);
            try (Optimizer opt = AdamW.of(0.5f).create(ops, net.table(), net.params(), net.grads())) {
                opt.step(1, 0.1f, 1f); // zero gradients: only weight decay moves anything
            }
            float[] after = new float[before.length];
            MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, after, 0, after.length);
            for (ParameterTable.Entry e : net.table().entries()) {
                for (long i = e.offset(); i < e.offset() + e.count(); i++) {
                    float want = e.decays() ? before[(int) i] * (1 - 0.1f * 0.5f) : before[(int) i];
                    assertThat(after[(int) i]).as(e.name()).isCloseTo(want, within(1e-6f));
                }
            }
            assertThat(net.table().entry("net.fc.weight").decays()).isTrue();
            assertThat(net.table().entry("net.fc.bias").decays()).isFalse();
            assertThat(net.table().entry("net.norm.weight").decays()).isFalse();
        }
    }

    @Test
    void anOptimizerGivenAnotherNetworksBuffersIsRefused() {
        try (Network a = Network.of(Linear.of("fc", 3, 4)).features(3).classes(2).batch(1, 1).build(ops);
             Network b = Network.of(Linear.of("fc", 3, 5)).features(3).classes(2).batch(1, 1).build(ops)) {
            for (OptimizerSpec spec : new OptimizerSpec[] {AdamW.of(0f), Sgd.of(0.9f, 0f), Lion.of(0f)}) {
                org.assertj.core.api.Assertions.assertThatThrownBy(
                                () -> spec.create(ops, a.table(), b.params(), a.grads()))
                        .isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("params hold 20 fp32 values")
                        .hasMessageContaining("covers 16");
            }
        }
    }

    private static double[] slice(double[] a, int o, int c) {
        double[] s = new double[c];
        System.arraycopy(a, o, s, 0, c);
        return s;
    }
}
