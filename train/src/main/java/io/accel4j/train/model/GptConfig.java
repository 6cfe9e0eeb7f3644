package io.accel4j.train.model;

import java.util.List;
import java.util.Map;

/**
 * The shape of a GPT-2 model, as llm.c's {@code GPT2Config} and its checkpoint header carry it.
 *
 * @param maxT maximum sequence length ({@code max_seq_len}), the rows of {@code wpe}
 * @param V    vocabulary size ({@code vocab_size}): token ids are in {@code [0, V)}
 * @param Vp   padded vocabulary size ({@code padded_vocab_size}), the rows of {@code wte}; rows {@code V..Vp-1} are
 *             padding (zero at init, never a target), there so that the classifier GEMM has a friendly size
 * @param L    layers ({@code num_layers})
 * @param NH   attention heads ({@code num_heads}); {@code C} must be a multiple of it
 * @param C    channels ({@code channels})
 */
public record GptConfig(int maxT, int V, int Vp, int L, int NH, int C) {

    /** GPT-2 small (124M): llm.c's {@code gpt2_124M.bin}. */
    public static final GptConfig GPT2 = new GptConfig(1024, 50257, 50304, 12, 12, 768);
    /**
     * A byte-level toy (256-token vocabulary, 2 layers of 64 channels, about 0.12M parameters) that learns the
     * {@code DefaultDataset} in minutes on two cores at B=8, T=64.
     */
    public static final GptConfig TINY = new GptConfig(64, 256, 256, 2, 4, 64);
    /** A middle size for benchmarks: GPT-2's vocabulary with 4 layers of 256 channels. */
    public static final GptConfig BENCH = new GptConfig(256, 50257, 50304, 4, 4, 256);

    /** GPT-2 medium (350M): 24 layers of 1024 channels, 16 heads (llm.c's d24). */
    public static final GptConfig GPT2_MEDIUM = new GptConfig(1024, 50257, 50304, 24, 16, 1024);
    /** GPT-2 large (774M): 36 layers of 1280 channels, 20 heads (llm.c's d36). */
    public static final GptConfig GPT2_LARGE = new GptConfig(1024, 50257, 50304, 36, 20, 1280);
    /** GPT-2 XL (1.5B): 48 layers of 1600 channels, 25 heads (llm.c's d48). */
    public static final GptConfig GPT2_XL = new GptConfig(1024, 50257, 50304, 48, 25, 1600);
    /**
     * GPT-2's vocabulary with tiny's body (2 layers of 64 channels, maxT 128, about 3.3M parameters, almost all the
     * token embedding): the smallest model for GPT-2-token text, e.g. the README's Shakespeare job.
     */
    public static final GptConfig TINY_BPE = new GptConfig(128, 50257, 50304, 2, 4, 64);

    private static final Map<String, GptConfig> PRESETS = Map.of("gpt2", GPT2, "tiny", TINY, "bench", BENCH,
            "tiny-bpe", TINY_BPE, "gpt2-medium", GPT2_MEDIUM, "gpt2-large", GPT2_LARGE, "gpt2-xl", GPT2_XL);

    /** Checks every size is at least 1, {@code C % NH == 0} and {@code Vp >= V}; the message names the field. */
    public GptConfig {
        positive("maxT", maxT);
        positive("V", V);
        positive("Vp", Vp);
        positive("L", L);
        positive("NH", NH);
        positive("C", C);
        if (C % NH != 0) {
            throw new IllegalArgumentException("C (" + C + ") must be a multiple of NH (" + NH + ")");
        }
        if (Vp < V) {
            throw new IllegalArgumentException("Vp (" + Vp + ") must be at least V (" + V + ")");
        }
    }

    private static void positive(String name, int value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + value);
        }
    }

    /** Channels per head, {@code C / NH}. */
    public int headSize() {
        return C / NH;
    }

    /** The number of fp32 parameters, {@link ParameterLayout#count()}. */
    public long parameterCount() {
        return ParameterLayout.count(this);
    }

    /** A preset by name (one of {@link #presetNames()}); otherwise an error listing them. */
    public static GptConfig preset(String name) {
        GptConfig c = PRESETS.get(name);
        if (c == null) {
            throw new IllegalArgumentException("unknown model preset '" + name + "': one of " + presetNames());
        }
        return c;
    }

    /** The preset names, in a stable order. */
    public static List<String> presetNames() {
        return List.of("gpt2", "tiny", "bench", "tiny-bpe", "gpt2-medium", "gpt2-large", "gpt2-xl");
    }

    @Override
    public String toString() {
        return "GptConfig[maxT=" + maxT + ", V=" + V + ", Vp=" + Vp + ", L=" + L + ", NH=" + NH + ", C=" + C + "]";
    }
}
