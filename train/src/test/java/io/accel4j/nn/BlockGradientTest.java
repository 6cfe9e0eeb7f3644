package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every block's backward against finite differences of its forward: each block sits between a linear layer (so that
 * its input gradient reaches parameters before it) and a head, and for every parameter tensor of the network the
 * gradient's derivative along two random unit directions, {@code Σ g·d}, is compared with the fourth-order central
 * difference of the mean loss, {@code (8(L(h)−L(−h)) − (L(2h)−L(−2h)))/12h}, the losses summed in float64 by the
 * kernels. Odd sizes throughout (C = 6, T = 5, 3 classes).
 */
class BlockGradientTest {

    /**
     * Step: the difference's truncation error is O(h⁴·L⁽⁵⁾) ≈ 1e-6 at h = 0.05 on these O(1) networks, while the fp32
     * forward's rounding (a few ulps of a loss of ~1, ≈ 1e-6) divided by h adds ≈ 3e-5.
     */
    private static final double H = 0.05;
    /** Both errors above with a 10× margin, plus 1 % of the derivative: a wrong term is an O(1) relative error. */
    private static final double ABS = 5e-4, REL = 1e-2;

    private static final int B = 2, T = 5, C = 6, CLASSES = 3;

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

    /** in (features C) → Linear C→C → block → Linear C→CLASSES. */
    private static void checkBlock(Supplier<Module> block, Recompute recompute, long seed) {
        Sequential body = new Sequential("net", Linear.of("in", C, C), block.get(), Linear.of("head", C, CLASSES));
        check(Network.of(body).features(C).classes(CLASSES).batch(B, T).recompute(recompute), seed, false);
    }

    private static void check(NetworkSpec spec, long seed, boolean tokens) {
        Random r = new Random(seed);
        try (Network net = spec.build(ops); Arena a = Arena.ofConfined()) {
            net.initialise(seed);
            long n = net.table().count();
            float[] p = new float[(int) n];
            for (int i = 0; i < p.length; i++) { // O(1) weights, so that every nonlinearity is exercised
                p[i] = (float) (0.6 * r.nextGaussian());
            }
            for (ParameterTable.Entry e : net.table().entries()) {
                if (e.name().endsWith("ln_1.weight") || e.name().endsWith("ln_2.weight")
                        || e.name().endsWith("norm.weight")) {
                    for (long i = 0; i < e.count(); i++) {
                        p[(int) (e.offset() + i)] += 1;
                    }
                }
            }
            int rows = B * T;
            MemorySegment in = a.allocate((long) rows * net.inputWidth() * 4), tg = a.allocate(rows * 4L);
            for (int i = 0; i < rows * net.inputWidth(); i++) {
                if (tokens) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(5));
                } else {
                    in.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) r.nextGaussian());
                }
            }
            for (int i = 0; i < rows; i++) {
                tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(net.classes()));
            }
            net.copyParamsFromHost(MemorySegment.ofArray(p));
            net.zeroGrad();
            net.forwardBackward(in, tg, B, T, 1f / rows);
            float[] g = new float[(int) n];
            MemorySegment.copy(net.grads(), ValueLayout.JAVA_FLOAT, 0, g, 0, g.length);
            for (ParameterTable.Entry e : net.table().entries()) {
                for (int dir = 0; dir < 2; dir++) {
                    double[] d = new double[(int) e.count()];
                    double norm = 0;
                    for (int i = 0; i < d.length; i++) {
                        d[i] = r.nextGaussian();
                        norm += d[i] * d[i];
                    }
                    double analytic = 0;
                    for (int i = 0; i < d.length; i++) {
                        d[i] /= Math.sqrt(norm);
                        analytic += g[(int) (e.offset() + i)] * d[i];
                    }
                    double l1 = loss(net, p, e, d, H, in, tg), lm1 = loss(net, p, e, d, -H, in, tg);
                    double l2 = loss(net, p, e, d, 2 * H, in, tg), lm2 = loss(net, p, e, d, -2 * H, in, tg);
                    double fd = (8 * (l1 - lm1) - (l2 - lm2)) / (12 * H);
                    assertThat(analytic).as("%s, direction %d (seed %d)", e.name(), dir, seed)
                            .isCloseTo(fd, org.assertj.core.api.Assertions.within(ABS + REL * Math.abs(fd)));
                }
            }
        }
    }

    private static double loss(Network net, float[] p, ParameterTable.Entry e, double[] d, double h,
                               MemorySegment in, MemorySegment tg) {
        float[] q = p.clone();
        for (int i = 0; i < d.length; i++) {
            q[(int) (e.offset() + i)] = (float) (p[(int) (e.offset() + i)] + h * d[i]);
        }
        net.copyParamsFromHost(MemorySegment.ofArray(q));
        return net.forward(in, tg, B, T);
    }

    @Test
    void linear() {
        checkBlock(() -> Linear.of("fc", C, C), Recompute.NONE, 1);
        checkBlock(() -> Linear.noBias("fc", C, C), Recompute.NONE, 2);
    }

    @Test
    void linearWithGeluAndGelu() {
        checkBlock(() -> new Sequential("s", Linear.gelu("fc", C, 7), Linear.of("back", 7, C)), Recompute.NONE, 3);
        checkBlock(() -> new Sequential("s", Linear.of("fc", C, C), new Gelu("act")), Recompute.NONE, 4);
    }

    @Test
    void layerNormAndResidual() {
        checkBlock(() -> new LayerNorm("norm", C), Recompute.NONE, 5);
        checkBlock(() -> new Residual("res", new Sequential("f", new LayerNorm("norm", C), Linear.gelu("fc", C, C))),
                Recompute.NONE, 6);
    }

    @Test
    void attentionAndMlp() {
        checkBlock(() -> new CausalSelfAttention("attn", C, 2), Recompute.NONE, 7);
        checkBlock(() -> new Mlp("mlp", C, 9), Recompute.NONE, 8);
    }

    @Test
    void transformerBlocksInEveryRecomputeMode() {
        long seed = 9;
        for (Recompute r : Recompute.values()) {
            checkBlock(() -> new Sequential("h", new TransformerBlock("0", C, 3), new TransformerBlock("1", C, 2)), r,
                    seed++);
        }
    }

    @Test
    void embeddingsAndHeads() {
        Embedding tied = new Embedding("embed", 5, 8, C, T, false);
        check(Network.of(new Sequential("lm", tied, new LayerNorm("norm", C), LmHead.tied("head", tied)))
                .tokens(5).classes(5).batch(B, T), 20, true);
        check(Network.of(new Sequential("lm", Embedding.tokens("embed", 5, C), new TransformerBlock("0", C, 2),
                        LmHead.untied("head", C, 4))).tokens(5).classes(CLASSES).batch(B, T), 21, true);
    }
}
