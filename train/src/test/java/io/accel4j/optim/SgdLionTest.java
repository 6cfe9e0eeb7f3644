package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cpu.ref.LionRef;
import io.accel4j.cpu.ref.SgdRef;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link Sgd} (with momentum, and Nesterov) and {@link Lion} over a network's parameter groups against the float64
 * references ({@link SgdRef}, {@link LionRef}) applied tensor by tensor with each tensor's decay and learning-rate
 * multiplier, over several steps with fresh gradients.
 */
class SgdLionTest {

    /**
     * fp32 update against float64 over 4 steps: each step moves a parameter of O(1) by lr·O(1) with a few fp32
     * roundings (≈ 1e-7 relative); Lion's sign can flip only where c is within rounding of 0, which random gradients
     * of O(1) do not reach. 1e-5 is a 10× margin.
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

    /** The reference update of one tensor's slice, in place. */
    interface Ref {
        void update(double[] p, double[] g, double[] state, float lr, boolean decays, int t, double gradScale);
    }

    private static void check(OptimizerSpec spec, Ref ref, int stateFloats) {
        Module body = new Sequential("net", Linear.of("fc", 3, 5), new LayerNorm("norm", 5),
                new AdamWTest.Scaled("half", 0.5f), Linear.noBias("head", 5, 2));
        try (Network net = Network.of(body).features(3).classes(2).batch(2, 1).build(ops)) {
            ParameterTable table = net.table();
            int n = (int) table.count();
            Random r = new Random(11);
            double[] p = new double[n], st = new double[n];
            float[] pf = new float[n];
            for (int i = 0; i < n; i++) {
                pf[i] = (float) r.nextGaussian();
                p[i] = pf[i];
            }
            MemorySegment.copy(pf, 0, net.params(), ValueLayout.JAVA_FLOAT, 0, n);
            try (Optimizer opt = spec.create(ops, table, net.params(), net.grads())) {
                assertThat(opt.stateBytes()).isEqualTo((long) stateFloats * 4 * n);
                assertThat(spec.stateFloatsPerParameter()).isEqualTo(stateFloats);
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
                        double[] pe = new double[c], ge = new double[c], se = new double[c];
                        for (int i = 0; i < c; i++) {
                            pe[i] = p[o + i];
                            ge[i] = g[o + i];
                            se[i] = st[o + i];
                        }
                        ref.update(pe, ge, se, lr * e.lrScale(), e.decays(), t, gradScale);
                        System.arraycopy(pe, 0, p, o, c);
                        System.arraycopy(se, 0, st, o, c);
                    }
                    MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, pf, 0, n);
                    for (int i = 0; i < n; i++) {
                        assertThat((double) pf[i]).as("%s: param %d, step %d", opt.describe(), i, t)
                                .isCloseTo(p[i], within(TOL));
                    }
                }
            }
        }
    }

    @Test
    void sgdWithMomentumAndNesterovAsTheReference() {
        for (Sgd.Spec spec : new Sgd.Spec[] {Sgd.of(0.9f, 0.1f), new Sgd.Spec(0.8f, 0f, 0.05f, true),
                new Sgd.Spec(0.5f, 0.25f, 0f, false)}) {
            check(spec, (p, g, buf, lr, decays, t, s) -> SgdRef.update(p, g, buf, new SgdConfig(lr, spec.momentum(),
                    spec.dampening(), decays ? spec.weightDecay() : 0f, spec.nesterov()), t, s), 1);
        }
        check(Sgd.of(0f, 0.1f), (p, g, buf, lr, decays, t, s) -> SgdRef.update(p, g, buf,
                new SgdConfig(lr, 0f, 0f, decays ? 0.1f : 0f, false), t, s), 0);
    }

    @Test
    void lionAsTheReference() {
        Lion.Spec spec = Lion.of(0.1f);
        check(spec, (p, g, m, lr, decays, t, s) -> LionRef.update(p, g, m, new LionConfig(lr, spec.beta1(),
                spec.beta2(), decays ? spec.weightDecay() : 0f), s), 1);
    }
}
