package io.accel4j.train.sample;

import io.accel4j.train.data.Mt19937;
import io.accel4j.train.model.Gpt2;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.IntConsumer;

/**
 * Sampled generation from a {@link Gpt2}, as llm.c's {@code train_gpt2.c} samples: for each new token the whole
 * context (its last {@code model.maxT()} tokens; no KV cache) runs through the model, and the next token is drawn from
 * the last position's logits.
 *
 * <ul>
 *   <li>temperature 0: greedy, the most likely token (the first of equal maxima), exactly {@link Sampler#greedy};
 *       no random numbers are drawn;</li>
 *   <li>otherwise {@code p = softmax(logits[0:V] / temperature)} restricted to the {@code topK} most likely tokens
 *       (ties to the lower id; {@code topK = 0} or {@code ≥ V}: all V) and renormalised; one
 *       {@link Mt19937#nextFloat} coin per token picks the first id, in id order, whose cumulative probability
 *       exceeds the coin (llm.c's {@code sample_mult}).</li>
 * </ul>
 * The padded vocabulary columns {@code [V, Vp)} are never candidates. {@code topK = 1} is greedy at any temperature.
 * Not thread-safe; one generator per model.
 */
public final class Generator implements AutoCloseable {

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private final Gpt2 model;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment inputs;
    private final MemorySegment logits;
    private final Choice choice;

    /** A generator over {@code model} (its maxB ≥ 1 is enough). */
    public Generator(Gpt2 model) {
        this.model = Objects.requireNonNull(model, "model");
        this.inputs = arena.allocate((long) model.maxT() * Integer.BYTES);
        this.logits = arena.allocate((long) model.config().V() * Float.BYTES);
        this.choice = new Choice(model.config().V());
    }

    /** {@link #generate(int[], int, float, int, long, IntConsumer)} without a per-token callback. */
    public int[] generate(int[] prompt, int n, float temperature, int topK, long seed) {
        return generate(prompt, n, temperature, topK, seed, t -> { });
    }

    /**
     * The {@code n} tokens that follow {@code prompt} (at least one token, each in {@code [0, V)}; any length, only
     * the last {@code maxT} are seen).
     *
     * @param temperature ≥ 0 and finite; 0 is greedy
     * @param topK        ≥ 0; 0 means all V tokens
     * @param seed        the {@link Mt19937} seed, in {@code [0, 2^32)}
     * @param onToken     called with each new token as soon as it is chosen
     */
    public int[] generate(int[] prompt, int n, float temperature, int topK, long seed, IntConsumer onToken) {
        checkArguments(prompt.length, n, temperature, topK);
        int[] out = new int[n];
        int[] count = {0};
        stream(prompt, n, temperature, topK, seed, t -> {
            out[count[0]++] = t;
            onToken.accept(t);
        });
        return out;
    }

    /**
     * {@link #generate}'s tokens handed to {@code onToken} one by one as they are chosen, holding only the last
     * {@code maxT} of the context: memory does not grow with {@code n}, so any number of tokens can be streamed.
     */
    public void stream(int[] prompt, long n, float temperature, int topK, long seed, IntConsumer onToken) {
        checkArguments(prompt.length, 0, temperature, topK);
        if (n < 0) {
            throw new IllegalArgumentException("the number of tokens must be >= 0, got " + n);
        }
        int V = model.config().V();
        for (int i = 0; i < prompt.length; i++) {
            if (prompt[i] < 0 || prompt[i] >= V) {
                throw new IllegalArgumentException("prompt[" + i + "] is token " + prompt[i]
                        + ", outside the model's vocabulary [0, " + V + ")");
            }
        }
        Mt19937 rng = temperature == 0 ? null : new Mt19937(seed);
        int maxT = model.maxT();
        int[] window = new int[maxT];
        int len = Math.min(prompt.length, maxT);
        System.arraycopy(prompt, prompt.length - len, window, 0, len);
        for (long k = 0; k < n; k++) {
            MemorySegment.copy(window, 0, inputs, I32, 0, len);
            model.forward(inputs, null, 1, len);
            lastLogits(model, len, logits);
            int next = rng == null
                    ? argmax(logits, 0, V)
                    : choice.sample(logits, 0, temperature, topK, rng.nextFloat());
            if (len == maxT) {
                System.arraycopy(window, 1, window, 0, maxT - 1);
                len--;
            }
            window[len++] = next;
            onToken.accept(next);
        }
    }

    /**
     * One draw from the logits row starting at element {@code row} of {@code logits} (V candidates): the token that
     * {@link #generate} picks for that row and {@code coin} ∈ [0, 1) (temperature > 0).
     */
    public static int sample(MemorySegment logits, long row, int V, float temperature, int topK, float coin) {
        checkArguments(1, 0, temperature, topK);
        if (temperature == 0) {
            return argmax(logits, row, V);
        }
        return new Choice(V).sample(logits, row, temperature, topK, coin);
    }

    private static void checkArguments(int promptLength, int n, float temperature, int topK) {
        if (promptLength < 1) {
            throw new IllegalArgumentException("the prompt is empty: give at least one token");
        }
        if (n < 0) {
            throw new IllegalArgumentException("the number of tokens must be >= 0, got " + n);
        }
        if (!(temperature >= 0) || !Float.isFinite(temperature)) {
            throw new IllegalArgumentException("the temperature must be finite and >= 0, got " + temperature);
        }
        if (topK < 0) {
            throw new IllegalArgumentException("top-k must be >= 0 (0: all tokens), got " + topK);
        }
    }

    /**
     * Copies the V logits of position {@code T − 1} of the last forward (one sequence) from the model's memory into
     * {@code host} (at least V floats).
     */
    static void lastLogits(Gpt2 model, int T, MemorySegment host) {
        long V = model.config().V(), row = (long) (T - 1) * model.config().Vp();
        model.memory().copyToHost(model.logits().asSlice(row * Float.BYTES, V * Float.BYTES),
                host.asSlice(0, V * Float.BYTES));
    }

    /**
     * The first index of the largest of the V logits of the row (NaN never wins); {@link Sampler#greedy} picks by it.
     */
    static int argmax(MemorySegment logits, long row, int V) {
        int best = 0;
        float max = logits.getAtIndex(F32, row);
        for (int j = 1; j < V; j++) {
            float x = logits.getAtIndex(F32, row + j);
            if (x > max) {
                max = x;
                best = j;
            }
        }
        return best;
    }

    @Override
    public void close() {
        arena.close();
    }

    /** The scratch of one draw, allocated once per generator: the candidates and their weights. */
    private static final class Choice {

        private final int V;
        private final long[] keys;
        private final int[] ids;
        private final double[] weights;

        Choice(int V) {
            this.V = V;
            this.keys = new long[V];
            this.ids = new int[V];
            this.weights = new double[V];
        }

        int sample(MemorySegment logits, long row, float temperature, int topK, float coin) {
            int k = topK == 0 || topK >= V ? V : topK;
            if (k == V) {
                for (int j = 0; j < V; j++) {
                    ids[j] = j;
                }
            } else {
                // order by logit descending, then id ascending: the key's high half is the float's order-preserving
                // bits, the low half ~id (unsigned), so the k largest keys are the top k, ties to the lower id
                for (int j = 0; j < V; j++) {
                    float x = logits.getAtIndex(F32, row + j);
                    int bits = Float.floatToIntBits(x == 0 ? 0f : x); // −0 ties with +0, as in argmax
                    int ordered = bits < 0 ? bits ^ 0x7fff_ffff : bits;
                    keys[j] = ((long) ordered << 32) | (~j & 0xffff_ffffL);
                }
                Arrays.sort(keys);
                for (int i = 0; i < k; i++) {
                    ids[i] = ~(int) keys[V - 1 - i];
                }
                Arrays.sort(ids, 0, k); // sample_mult walks in id order
            }
            float max = Float.NEGATIVE_INFINITY;
            for (int i = 0; i < k; i++) {
                max = Math.max(max, logits.getAtIndex(F32, row + ids[i]));
            }
            double sum = 0;
            for (int i = 0; i < k; i++) {
                double w = Math.exp((logits.getAtIndex(F32, row + ids[i]) - (double) max) / temperature);
                weights[i] = w;
                sum += w;
            }
            double cdf = 0;
            for (int i = 0; i < k; i++) {
                cdf += weights[i] / sum;
                if (coin < cdf) {
                    return ids[i];
                }
            }
            return ids[k - 1]; // rounding left the cdf just under the coin
        }
    }
}
