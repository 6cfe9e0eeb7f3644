package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.Recompute;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every block's backward against finite differences of its forward ({@link GradientCheck}): each block sits between a linear layer (so that
 * its input gradient reaches parameters before it) and a head, and for every parameter tensor of the network the
 * gradient's derivative along two random unit directions, {@code Σ g·d}, is compared with the fourth-order central
 * difference of the mean loss, {@code (8(L(h)−L(−h)) − (L(2h)−L(−2h)))/12h}, the losses summed in float64 by the
 * kernels. Odd sizes throughout (C = 6, T = 5, 3 classes).
 */
class BlockGradientTest {

    /** {@link GradientCheck}'s tolerances, justified there. */
    private static final double ABS = GradientCheck.ABS, REL = GradientCheck.REL;

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
        check(Network.of(body).features(C).classes(CLASSES).batch(B, T).recompute(recompute), seed);
    }

    private static void check(NetworkSpec spec, long seed) {
        for (GradientCheck.Comparison c : GradientCheck.run(spec, ops, B, T, seed)) {
            assertThat(c.analytic()).as("%s, direction %d (seed %d)", c.name(), c.direction(), seed)
                    .isCloseTo(c.difference(), within(ABS + REL * Math.abs(c.difference())));
        }
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
                .tokens(5).classes(5).batch(B, T), 20);
        check(Network.of(new Sequential("lm", Embedding.tokens("embed", 5, C), new TransformerBlock("0", C, 2),
                        LmHead.untied("head", C, 4))).tokens(5).classes(CLASSES).batch(B, T), 21);
    }
}
