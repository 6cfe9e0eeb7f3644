package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Activation checkpointing changes what is kept, never what is computed: with {@link Recompute#GELU} and
 * {@link Recompute#LAYER} the losses and every gradient are bit for bit those of {@link Recompute#NONE}, over
 * several micro-batches (so a stale buffer from an earlier batch or layer would show), and the activation memory
 * shrinks by exactly what the mode keeps for one layer instead of L.
 */
class RecomputeTest {

    /** Three layers (so a middle layer is recomputed with both neighbours' buffers live), odd V and T. */
    private static final GptConfig CONFIG = new GptConfig(16, 13, 16, 3, 2, 8);
    private static final int MAX_B = 3, MAX_T = 7;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

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

    static Recompute[] recomputing() {
        return new Recompute[] {Recompute.GELU, Recompute.LAYER};
    }

    static Recompute[] modes() {
        return Recompute.values();
    }

    @ParameterizedTest
    @MethodSource("recomputing")
    void lossesAndGradientsAreBitIdenticalToKeepingEverything(Recompute mode) {
        float[] params = Gpt2Test.randomParams(CONFIG, 7);
        try (Arena arena = Arena.ofConfined();
             Gpt2 keep = new Gpt2(CONFIG, ops, MAX_B, MAX_T);
             Gpt2 recompute = new Gpt2(CONFIG, ops, MAX_B, MAX_T, Gpt2Options.DEFAULT.withRecompute(mode))) {
            Gpt2Test.setParams(keep, params);
            Gpt2Test.setParams(recompute, params);
            Random r = new Random(11);
            // a full batch, then a smaller one (the layers pack differently), accumulating into the gradients
            int[][] shapes = {{MAX_B, MAX_T}, {2, 5}, {MAX_B, MAX_T}};
            keep.zeroGrad();
            recompute.zeroGrad();
            for (int[] bt : shapes) {
                int n = bt[0] * bt[1];
                MemorySegment inp = tokens(arena, Gpt2Test.randomTokens(n, CONFIG.V(), r));
                MemorySegment tgt = tokens(arena, Gpt2Test.randomTokens(n, CONFIG.V(), r));
                float scale = 1f / n;
                double expected = keep.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                double actual = recompute.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                assertThat(actual).as("loss with %s at B=%d, T=%d", mode, bt[0], bt[1]).isEqualTo(expected);
                // the forward-only path (validation) is unaffected too
                assertThat(recompute.forward(inp, tgt, bt[0], bt[1]))
                        .isEqualTo(keep.forward(inp, tgt, bt[0], bt[1]));
                keep.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                recompute.forwardBackward(inp, tgt, bt[0], bt[1], scale);
            }
            long count = keep.layout().count();
            float[] g0 = Gpt2Test.toArray(keep.grads(), count), g1 = Gpt2Test.toArray(recompute.grads(), count);
            assertThat(maxAbs(g0)).as("gradients were computed").isGreaterThan(0f);
            for (int i = 0; i < g0.length; i++) {
                if (Float.floatToRawIntBits(g0[i]) != Float.floatToRawIntBits(g1[i])) {
                    throw new AssertionError(mode + ": gradient " + i + " is " + g1[i] + ", keeping everything "
                            + g0[i]);
                }
            }
        }
    }

    @ParameterizedTest
    @MethodSource("modes")
    void activationBytesShrinkByWhatIsKeptForOneLayer(Recompute mode) {
        long C = CONFIG.C();
        long none = Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.NONE);
        // floats per position of the per-layer tensors the mode holds for one layer instead of L
        long[] widths = mode == Recompute.NONE ? new long[0]
                : mode == Recompute.GELU ? new long[] {4 * C} // fch_gelu
                // ln1, atty, attproj, residual2, ln2, fcproj; the four LayerNorm statistics; qkv; att_lse; fch, fch_gelu
                : new long[] {C, C, C, C, C, C, 1, 1, 1, 1, 3 * C, CONFIG.NH(), 4 * C, 4 * C};
        long savedFloats = 0;
        for (long w : widths) { // each block's region, rounded on its own, but one
            savedFloats += (CONFIG.L() - 1) * regionFloats(1, w);
        }
        long expected = none - savedFloats * Float.BYTES;
        long planned = Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, mode);
        assertThat(planned).as("planned activation bytes with %s", mode).isEqualTo(expected);
        try (Gpt2 model = new Gpt2(CONFIG, ops, MAX_B, MAX_T, Gpt2Options.DEFAULT.withRecompute(mode))) {
            assertThat(model.activationBytes()).as("allocated = planned").isEqualTo(planned);
            assertThat(model.recompute()).isEqualTo(mode);
        }
    }

    /** A tensor's region: {@code layers·maxB·maxT·width} floats rounded up to 16 (64 bytes), as allocated. */
    private static long regionFloats(long layers, long width) {
        long floats = layers * MAX_B * MAX_T * width;
        return (floats + 15) / 16 * 16;
    }

    private static MemorySegment tokens(Arena arena, int[] t) {
        MemorySegment s = arena.allocate((long) t.length * Integer.BYTES);
        for (int i = 0; i < t.length; i++) {
            s.setAtIndex(I32, i, t[i]);
        }
        return s;
    }

    private static float maxAbs(float[] a) {
        float m = 0;
        for (float x : a) {
            m = Math.max(m, Math.abs(x));
        }
        return m;
    }
}
