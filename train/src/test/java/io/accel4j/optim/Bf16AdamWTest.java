package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.Bf16;
import io.accel4j.core.CounterRng;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cpu.ref.AdamWRef;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link Bf16AdamW}: its fp32 master weights against the float64 reference ({@link AdamWRef}) group by group over
 * several steps, the network's weights exactly the master's stochastic bf16 rounding with step t's random bits, and a
 * ZeRO-style split into two shards bit-identical to the whole vector.
 */
class Bf16AdamWTest {

    /** As {@link AdamWTest}: the master is AdamW's fp32 update, ≈ 1e-7 relative a step; 4 steps, 10× margin. */
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

    private static Network network() {
        Module body = new Sequential("net", Linear.of("fc", 3, 5), new LayerNorm("norm", 5),
                new AdamWTest.Scaled("half", 0.5f), Linear.noBias("head", 5, 2));
        return Network.of(body).features(3).classes(2).batch(2, 1).build(ops);
    }

    @Test
    void masterFollowsTheReferenceAndTheWeightsAreItsStochasticRounding() {
        try (Network net = network()) {
            ParameterTable table = net.table();
            int n = (int) table.count();
            Random r = new Random(5);
            double[] p = new double[n], m = new double[n], v = new double[n];
            float[] pf = new float[n];
            for (int i = 0; i < n; i++) {
                pf[i] = (float) r.nextGaussian();
                p[i] = pf[i];
            }
            MemorySegment.copy(pf, 0, net.params(), ValueLayout.JAVA_FLOAT, 0, n);
            Bf16AdamW.Spec spec = new Bf16AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false, 1234L);
            try (Optimizer opt = spec.create(ops, table, net.params(), net.grads())) {
                assertThat(opt.state().keySet()).containsExactly("master", "m", "v");
                assertThat(opt.stateBytes()).isEqualTo(3L * 4 * n);
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
                        double[] pe = new double[c], me = new double[c], ve = new double[c], ge = new double[c];
                        System.arraycopy(p, o, pe, 0, c);
                        System.arraycopy(m, o, me, 0, c);
                        System.arraycopy(v, o, ve, 0, c);
                        for (int i = 0; i < c; i++) {
                            ge[i] = g[o + i];
                        }
                        AdamWRef.update(pe, ge, me, ve, new AdamWConfig(lr * e.lrScale(), 0.9f, 0.95f, 1e-8f,
                                e.decays() ? 0.1f : 0f), t, gradScale);
                        System.arraycopy(pe, 0, p, o, c);
                        System.arraycopy(me, 0, m, o, c);
                        System.arraycopy(ve, 0, v, o, c);
                    }
                    float[] master = opt.state().get("master").toArray(ValueLayout.JAVA_FLOAT);
                    float[] weights = net.params().toArray(ValueLayout.JAVA_FLOAT);
                    long seed = spec.seed(t);
                    for (int i = 0; i < n; i++) {
                        assertThat((double) master[i]).as("master %d, step %d", i, t).isCloseTo(p[i], within(TOL));
                        float want = Bf16.toFloat(Bf16.fromFloatStochastic(master[i], CounterRng.bits(seed, i)));
                        assertThat(weights[i]).as("weight %d, step %d: bf16 SR of the master", i, t).isEqualTo(want);
                    }
                }
            }
        }
    }

    @Test
    void twoShardsRoundAsTheWholeVector() {
        try (Network whole = network(); Network split = network(); Arena arena = Arena.ofConfined()) {
            whole.initialise(9);
            split.initialise(9);
            ParameterTable table = whole.table();
            int n = (int) table.count(), k = n / 2 + 3;
            Bf16AdamW.Spec spec = Bf16AdamW.of(0.05f, 77L);
            MemorySegment sp = split.params(), sg = split.grads();
            try (Optimizer all = spec.create(ops, table, whole.params(), whole.grads());
                 Optimizer lo = spec.create(ops, table, sp.asSlice(0, 4L * k), sg.asSlice(0, 4L * k), 0, k);
                 Optimizer hi = spec.create(ops, table, sp.asSlice(4L * k), sg.asSlice(4L * k), k, n - k)) {
                Random r = new Random(3);
                for (int t = 1; t <= 3; t++) {
                    for (int i = 0; i < n; i++) {
                        float gi = (float) r.nextGaussian();
                        whole.grads().setAtIndex(ValueLayout.JAVA_FLOAT, i, gi);
                        sg.setAtIndex(ValueLayout.JAVA_FLOAT, i, gi);
                    }
                    all.step(t, 0.02f, 1f);
                    lo.step(t, 0.02f, 1f);
                    hi.step(t, 0.02f, 1f);
                    for (int i = 0; i < n; i++) {
                        assertThat(Float.floatToRawIntBits(sp.getAtIndex(ValueLayout.JAVA_FLOAT, i)))
                                .as("weight %d, step %d", i, t)
                                .isEqualTo(Float.floatToRawIntBits(whole.params().getAtIndex(ValueLayout.JAVA_FLOAT, i)));
                    }
                }
            }
        }
    }

    @Test
    void eachStepHasItsOwnRoundingStream() {
        Bf16AdamW.Spec spec = Bf16AdamW.of(0f, 1L);
        assertThat(spec.seed(1)).isNotEqualTo(spec.seed(2));
        assertThat(Bf16AdamW.of(0f, 2L).seed(1)).isNotEqualTo(spec.seed(1));
        assertThat(spec.stateFloatsPerParameter()).isEqualTo(3);
    }
}
