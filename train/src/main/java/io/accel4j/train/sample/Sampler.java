package io.accel4j.train.sample;

import io.accel4j.train.model.Gpt2;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * Greedy generation from a {@link Gpt2}: append the most likely next token (the first of equal maxima) until a stop
 * token or a token limit, running the whole context through the model each time (no KV cache: for short
 * completions of small models). The context keeps the last {@code model.maxT()} tokens.
 */
public final class Sampler implements AutoCloseable {

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    private final Gpt2 model;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment inputs;
    private final MemorySegment logits;

    /** A sampler of {@code model}, which needs maxB ≥ 1. */
    public Sampler(Gpt2 model) {
        this.model = model;
        this.inputs = arena.allocate((long) model.maxT() * Integer.BYTES);
        this.logits = arena.allocate((long) model.config().V() * Float.BYTES);
    }

    /**
     * The greedy continuation of {@code prompt} (at least one token), at most {@code maxNew} tokens, ending early
     * after {@code stop} (included; −1: no stop token).
     */
    public int[] greedy(int[] prompt, int maxNew, int stop) {
        if (prompt.length == 0) {
            throw new IllegalArgumentException("the prompt is empty");
        }
        int[] ctx = Arrays.copyOf(prompt, prompt.length + maxNew);
        int n = prompt.length;
        int V = model.config().V();
        for (int k = 0; k < maxNew; k++) {
            int T = Math.min(n, model.maxT());
            MemorySegment.copy(ctx, n - T, inputs, I32, 0, T);
            model.forward(inputs, null, 1, T);
            Generator.lastLogits(model, T, logits);
            int best = Generator.argmax(logits, 0, V);
            ctx[n++] = best;
            if (best == stop) {
                break;
            }
        }
        return Arrays.copyOfRange(ctx, prompt.length, n);
    }

    /** Byte-level text: the greedy continuation of {@code prompt} up to a newline or {@code maxNew} bytes. */
    public String completeLine(String prompt, int maxNew) {
        byte[] bytes = prompt.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
        int[] p = new int[bytes.length];
        for (int i = 0; i < p.length; i++) {
            p[i] = bytes[i] & 0xFF;
        }
        int[] out = greedy(p, maxNew, '\n');
        StringBuilder sb = new StringBuilder(out.length);
        for (int t : out) {
            sb.append(t < 256 ? (char) t : '\uFFFD');
        }
        return sb.toString();
    }

    @Override
    public void close() {
        arena.close();
    }
}
