package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code --recompute every:K}: the losses and every gradient bit for bit those of keeping everything, for segments
 * that divide the layers and that do not (a last segment of one layer), over several micro-batches of different
 * shapes; and the memory: ⌊(L−1)/K⌋ block outputs kept and K−1 held for a segment instead of all L−1.
 */
class SegmentRecomputeTest {

    /** Five layers: every:2 is segments {0,1} {2,3} {4}; every:3 is {0,1,2} {3,4}; every:5 one segment. */
    private static final GptConfig CONFIG = new GptConfig(16, 13, 16, 5, 2, 8);
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

    @ParameterizedTest
    @ValueSource(ints = {2, 3, 5, 9})
    void lossesAndGradientsAreBitIdenticalToKeepingEverything(int k) {
        float[] params = Gpt2Test.randomParams(CONFIG, 17);
        Recompute mode = Recompute.every(k);
        try (Arena arena = Arena.ofConfined();
             Gpt2 keep = new Gpt2(CONFIG, ops, MAX_B, MAX_T);
             Gpt2 segments = new Gpt2(CONFIG, ops, MAX_B, MAX_T, Gpt2Options.DEFAULT.withRecompute(mode))) {
            Gpt2Test.setParams(keep, params);
            Gpt2Test.setParams(segments, params);
            assertThat(segments.recompute()).isEqualTo(mode);
            Random r = new Random(5);
            int[][] shapes = {{MAX_B, MAX_T}, {2, 5}, {MAX_B, MAX_T}};
            keep.zeroGrad();
            segments.zeroGrad();
            for (int[] bt : shapes) {
                int n = bt[0] * bt[1];
                MemorySegment inp = tokens(arena, Gpt2Test.randomTokens(n, CONFIG.V(), r));
                MemorySegment tgt = tokens(arena, Gpt2Test.randomTokens(n, CONFIG.V(), r));
                float scale = 1f / n;
                double expected = keep.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                double actual = segments.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                assertThat(actual).as("loss with %s at B=%d, T=%d", mode, bt[0], bt[1]).isEqualTo(expected);
                // a validation forward between two backward passes overwrites the held outputs too
                assertThat(segments.forward(inp, tgt, bt[0], bt[1])).isEqualTo(keep.forward(inp, tgt, bt[0], bt[1]));
                keep.forwardBackward(inp, tgt, bt[0], bt[1], scale);
                segments.forwardBackward(inp, tgt, bt[0], bt[1], scale);
            }
            long count = keep.layout().count();
            float[] g0 = Gpt2Test.toArray(keep.grads(), count), g1 = Gpt2Test.toArray(segments.grads(), count);
            for (int i = 0; i < g0.length; i++) {
                if (Float.floatToRawIntBits(g0[i]) != Float.floatToRawIntBits(g1[i])) {
                    throw new AssertionError(mode + ": gradient " + i + " is " + g1[i] + ", keeping everything "
                            + g0[i]);
                }
            }
        }
    }

    @Test
    void segmentsKeepFewerLayerOutputsThanLayer() {
        long C = CONFIG.C();
        long layer = Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.LAYER);
        // the blocks' outputs 0..L-2 (the last block's is the sequence's): LAYER keeps all 4; every:K keeps the
        // ⌊(L−1)/K⌋ that end a segment and holds min(K−1, L−1) for one segment: every:2 keeps 2 (blocks 1, 3) and
        // holds 1, every:3 keeps 1 (block 2) and holds 2, every:5 (one segment) holds 4 and saves nothing
        long region = regionFloats(C) * Float.BYTES;
        assertThat(Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.every(2))).isEqualTo(layer - region);
        assertThat(Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.every(3))).isEqualTo(layer - region);
        assertThat(Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.every(5))).isEqualTo(layer)
                .isEqualTo(Gpt2.activationBytes(CONFIG, MAX_B, MAX_T, Recompute.every(9)));
        GptConfig twelve = new GptConfig(16, 13, 16, 12, 2, 8); // GPT-2 small's 12 layers: 11 outputs become 5
        assertThat(Gpt2.activationBytes(twelve, MAX_B, MAX_T, Recompute.LAYER)
                - Gpt2.activationBytes(twelve, MAX_B, MAX_T, Recompute.every(3))).isEqualTo(6 * region);
        try (Gpt2 g = new Gpt2(CONFIG, ops, MAX_B, MAX_T, Gpt2Options.DEFAULT.withRecompute(Recompute.every(2)))) {
            assertThat(g.activationBytes()).isEqualTo(layer - region);
        }
    }

    @Test
    void theModeParsesAndPrints() {
        assertThat(Recompute.parse("EVERY:4")).isEqualTo(Recompute.every(4)).hasToString("every:4");
        assertThat(Recompute.parse(" layer ")).isSameAs(Recompute.LAYER);
        assertThat(Recompute.every(3).segment()).isEqualTo(3);
        assertThat(Recompute.every(3).holdsLayers()).isTrue();
        assertThat(Recompute.GELU.holdsLayers()).isFalse();
        assertThatThrownBy(() -> Recompute.parse("every:1")).hasMessageContaining("K >= 2");
        assertThatThrownBy(() -> Recompute.parse("every:x")).hasMessageContaining("integer K");
        assertThatThrownBy(() -> Recompute.parse("some")).hasMessageContaining("none, gelu, layer or every:K");
    }

    /** One region of {@code width} floats per position, rounded up to 16 floats (64 bytes), as allocated. */
    private static long regionFloats(long width) {
        long floats = (long) MAX_B * MAX_T * width;
        return (floats + 15) / 16 * 16;
    }

    private static MemorySegment tokens(Arena arena, int[] t) {
        MemorySegment s = arena.allocate((long) t.length * Integer.BYTES);
        for (int i = 0; i < t.length; i++) {
            s.setAtIndex(I32, i, t[i]);
        }
        return s;
    }
}
