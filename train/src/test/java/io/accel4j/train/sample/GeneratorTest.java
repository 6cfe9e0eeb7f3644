package io.accel4j.train.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@link Generator}: greedy ≡ {@link Sampler}, top-k 1 ≡ greedy, seeded determinism, windowing, the draw. */
class GeneratorTest {

    /** A tiny model with tokens beyond the bytes (V = 300) and padding (Vp = 304); maxT 16 to exercise windowing. */
    static final GptConfig CONFIG = new GptConfig(16, 300, 304, 1, 2, 16);
    static final long INIT_SEED = 1234;

    static Parallel pool;
    static Gpt2 model;

    @BeforeAll
    static void build() {
        pool = new Parallel(1);
        model = new Gpt2(CONFIG, new CpuOps(pool), 1, CONFIG.maxT());
        model.initialise(INIT_SEED);
        // spread the logits (GPT-2 init makes them nearly flat, std ~0.08): wte ×20 gives std ~1.6
        MemorySegment p = model.params();
        ParameterLayout.Span wte = model.layout().tensor(ParameterLayout.Param.WTE);
        for (long i = wte.offset(); i < wte.offset() + wte.count(); i++) {
            p.setAtIndex(ValueLayout.JAVA_FLOAT, i, p.getAtIndex(ValueLayout.JAVA_FLOAT, i) * 20);
        }
    }

    @AfterAll
    static void free() {
        model.close();
        pool.close();
    }

    private static final int[] PROMPT = {104, 101, 108, 108, 111};

    @Test
    void greedyIsSamplersGreedy() {
        try (Generator g = new Generator(model); Sampler s = new Sampler(model)) {
            int[] expected = s.greedy(PROMPT, 24, -1);
            assertThat(g.generate(PROMPT, 24, 0f, 0, 7)).containsExactly(expected);
            assertThat(g.generate(PROMPT, 24, 0f, 5, 99)).containsExactly(expected); // no randomness at all
        }
    }

    @Test
    void topKOneIsGreedyAtAnyTemperature() {
        try (Generator g = new Generator(model)) {
            int[] greedy = g.generate(PROMPT, 12, 0f, 0, 0);
            for (float temperature : new float[] {0.3f, 1f, 5f}) {
                for (long seed : new long[] {1, 4_000_000_000L}) {
                    assertThat(g.generate(PROMPT, 12, temperature, 1, seed))
                            .as("temperature %s, seed %d", temperature, seed).containsExactly(greedy);
                }
            }
        }
    }

    @Test
    void aSeedRepeatsItsSamplesAndOtherSeedsDiffer() {
        try (Generator g = new Generator(model)) {
            int[] a = g.generate(PROMPT, 30, 1.5f, 0, 42);
            assertThat(g.generate(PROMPT, 30, 1.5f, 0, 42)).containsExactly(a);
            assertThat(g.generate(PROMPT, 30, 1.5f, 0, 43)).isNotEqualTo(a);
            assertThat(g.generate(PROMPT, 30, 1.5f, 10, 42)).isNotEqualTo(a);
            int[] seen = new int[CONFIG.V()];
            for (int t : a) {
                assertThat(t).isBetween(0, CONFIG.V() - 1);
                seen[t]++;
            }
            assertThat(Arrays.stream(seen).filter(c -> c > 0).count()).as("distinct tokens").isGreaterThan(3);
        }
    }

    @Test
    void aLongPromptIsWindowedToMaxT() {
        int[] longPrompt = new int[40];
        for (int i = 0; i < longPrompt.length; i++) {
            longPrompt[i] = (i * 37) % 256;
        }
        int[] tail = Arrays.copyOfRange(longPrompt, longPrompt.length - CONFIG.maxT(), longPrompt.length);
        try (Generator g = new Generator(model)) {
            assertThat(g.generate(longPrompt, 12, 0f, 0, 0)).containsExactly(g.generate(tail, 12, 0f, 0, 0));
            assertThat(g.generate(longPrompt, 12, 0.8f, 50, 3)).containsExactly(g.generate(tail, 12, 0.8f, 50, 3));
        }
    }

    @Test
    void badArgumentsAreRefused() {
        try (Generator g = new Generator(model)) {
            assertThatThrownBy(() -> g.generate(new int[0], 1, 1f, 0, 0)).hasMessageContaining("prompt is empty");
            assertThatThrownBy(() -> g.generate(PROMPT, 1, -1f, 0, 0)).hasMessageContaining("temperature");
            assertThatThrownBy(() -> g.generate(PROMPT, 1, Float.NaN, 0, 0)).hasMessageContaining("temperature");
            assertThatThrownBy(() -> g.generate(PROMPT, 1, 1f, -1, 0)).hasMessageContaining("top-k");
            assertThatThrownBy(() -> g.generate(new int[] {300}, 1, 1f, 0, 0))
                    .hasMessageContaining("prompt[0] is token 300");
        }
    }

    // ---- the draw on hand-made logits ----

    /** One row of V = 6 logits and 2 padding columns that would win if they were candidates. */
    private static MemorySegment row(Arena arena, float... v) {
        MemorySegment s = arena.allocate(8L * Float.BYTES);
        for (int i = 0; i < 8; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, i < v.length ? v[i] : 100f);
        }
        return s;
    }

    /** How often each token is drawn for M evenly spaced coins: p·M ± 1 when the draw inverts the cdf. */
    private static int[] counts(MemorySegment logits, float temperature, int topK, int M) {
        int[] c = new int[8];
        for (int i = 0; i < M; i++) {
            c[Generator.sample(logits, 0, 6, temperature, topK, (i + 0.5f) / M)]++;
        }
        return c;
    }

    @Test
    void theDrawInvertsTheSoftmaxCdfOverTheTopK() {
        int M = 20_000;
        try (Arena arena = Arena.ofConfined()) {
            float[] x = {1, 3, 2, 3, -1, 0};
            MemorySegment logits = row(arena, x);
            for (float temperature : new float[] {1f, 0.5f, 2f}) {
                for (int k : new int[] {0, 6, 9, 3, 2}) {
                    int kk = k == 0 || k > 6 ? 6 : k;
                    Integer[] order = {1, 3, 2, 0, 5, 4}; // by logit, ties to the lower id
                    double[] w = new double[6];
                    double sum = 0;
                    for (int i = 0; i < kk; i++) {
                        w[order[i]] = Math.exp(x[order[i]] / temperature);
                        sum += w[order[i]];
                    }
                    int[] c = counts(logits, temperature, k, M);
                    assertThat(c[6] + c[7]).as("padding drawn").isZero();
                    for (int i = 0; i < 6; i++) {
                        assertThat((double) c[i]).as("token %d, temperature %s, top-k %d", i, temperature, k)
                                .isCloseTo(w[i] / sum * M, org.assertj.core.data.Offset.offset(1.5));
                    }
                }
            }
            // the coin's extremes: the first and the last candidate in id order
            assertThat(Generator.sample(logits, 0, 6, 1f, 3, 0f)).isEqualTo(1);
            assertThat(Generator.sample(logits, 0, 6, 1f, 3, Math.nextDown(1f))).isEqualTo(3);
            assertThat(Generator.sample(logits, 0, 6, 1f, 0, Math.nextDown(1f))).isEqualTo(5);
            // greedy and top-1 take the first of equal maxima
            assertThat(Generator.sample(logits, 0, 6, 0f, 0, 0.9f)).isEqualTo(1);
            assertThat(Generator.sample(logits, 0, 6, 7f, 1, 0.9f)).isEqualTo(1);
            MemorySegment zeros = row(arena, -0f, 0f, -5, -5, -5, -5);
            assertThat(Generator.sample(zeros, 0, 6, 1f, 1, 0.5f)).isEqualTo(0);
            assertThat(Generator.sample(zeros, 0, 6, 0f, 0, 0.5f)).isEqualTo(0);
        }
    }
}
