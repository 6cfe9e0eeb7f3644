package io.accel4j.train.data;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The dataset accel4j trains on when given none: lines of two-digit addition, {@code "17+25=42\n"}, as byte-level
 * tokens (0..255, ASCII). Deterministic from a seed, needs no download, and shows learning plainly: the digits of the
 * operands are noise (about {@value #OPERAND_LIMIT}² equally likely problems) but every answer is determined by its
 * prompt, so a model that learns addition gets the answer tokens right — {@link #accuracy} measures it on problems
 * it never saw — and its loss falls well below the {@link #unigramEntropyNats unigram entropy} of the text.
 *
 * <p>Of the unordered operand pairs {@code {a, b}}, 0 ≤ a ≤ b &lt; {@value #OPERAND_LIMIT}, a seeded shuffle holds
 * out {@value #HELD_OUT_PERCENT}% for validation, in both orders ({@code a+b} and {@code b+a}: {@link #heldOut}); the
 * train text draws only from the others ({@link #trainProblems}), so no validation problem, nor its commuted twin,
 * is ever seen in training. All randomness is one {@link Mt19937} stream from the seed: the shuffle, then the train
 * lines, then the val lines.
 */
public final class DefaultDataset {

    /** Operands are in [0, OPERAND_LIMIT). */
    public static final int OPERAND_LIMIT = 100;
    /** Percentage of operand pairs held out for validation. */
    public static final int HELD_OUT_PERCENT = 10;
    /** The vocabulary: bytes. */
    public static final int VOCABULARY = 256;

    /** One addition problem. */
    public record Problem(int a, int b) {

        /** The prompt, {@code "a+b="}. */
        public String prompt() {
            return a + "+" + b + "=";
        }

        /** The answer, {@code "a+b"} in decimal. */
        public String answer() {
            return Integer.toString(a + b);
        }

        /** The training line, prompt, answer and newline. */
        public String line() {
            return prompt() + answer() + "\n";
        }
    }

    /**
     * The two splits as tokens.
     *
     * @param train the train tokens
     * @param val   the validation tokens, from held-out problems only
     */
    public record Splits(int[] train, int[] val) {}

    private DefaultDataset() {}

    /** {@code trainTokens} and {@code valTokens} (each ≥ 1) tokens of addition lines from {@code seed}. */
    public static Splits generate(long seed, int trainTokens, int valTokens) {
        if (trainTokens < 1 || valTokens < 1) {
            throw new IllegalArgumentException("trainTokens and valTokens must be >= 1, got " + trainTokens + " and "
                    + valTokens);
        }
        Mt19937 rng = new Mt19937(seed);
        List<List<Problem>> split = split(rng);
        int[] train = text(split.get(0), trainTokens, rng);
        int[] val = text(split.get(1), valTokens, rng);
        return new Splits(train, val);
    }

    /** The problems the train text is drawn from, for {@code seed}. */
    public static List<Problem> trainProblems(long seed) {
        return split(new Mt19937(seed)).get(0);
    }

    /** The held-out problems the validation text is drawn from, for {@code seed}; disjoint from the train ones. */
    public static List<Problem> heldOut(long seed) {
        return split(new Mt19937(seed)).get(1);
    }

    private static List<List<Problem>> split(Mt19937 rng) {
        List<Problem> unordered = new ArrayList<>();
        for (int a = 0; a < OPERAND_LIMIT; a++) {
            for (int b = a; b < OPERAND_LIMIT; b++) {
                unordered.add(new Problem(a, b));
            }
        }
        int n = unordered.size();
        int[] perm = new int[n];
        for (int i = 0; i < n; i++) {
            perm[i] = i;
        }
        SampleOrder.randomPermutation(perm, n, rng);
        int held = n * HELD_OUT_PERCENT / 100;
        List<Problem> val = new ArrayList<>();
        List<Problem> train = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Problem p = unordered.get(perm[i]);
            List<Problem> to = i < held ? val : train;
            to.add(p);
            if (p.a() != p.b()) {
                to.add(new Problem(p.b(), p.a()));
            }
        }
        return List.of(List.copyOf(train), List.copyOf(val));
    }

    private static int[] text(List<Problem> problems, int count, Mt19937 rng) {
        int[] out = new int[count];
        int n = 0;
        while (n < count) {
            Problem p = problems.get((int) (rng.nextUint32() % problems.size()));
            for (byte b : p.line().getBytes(StandardCharsets.US_ASCII)) {
                if (n == count) {
                    break;
                }
                out[n++] = b;
            }
        }
        return out;
    }

    /**
     * The fraction of {@code problems} answered exactly: {@code complete} gets each prompt ({@code "17+25="}) and
     * returns the model's greedy continuation; the text up to its first newline must equal the answer.
     */
    public static double accuracy(List<Problem> problems, Function<String, String> complete) {
        if (problems.isEmpty()) {
            throw new IllegalArgumentException("no problems to score");
        }
        int right = 0;
        for (Problem p : problems) {
            String c = complete.apply(p.prompt());
            int nl = c.indexOf('\n');
            if ((nl < 0 ? c : c.substring(0, nl)).equals(p.answer())) {
                right++;
            }
        }
        return (double) right / problems.size();
    }

    /**
     * The entropy of the tokens' empirical unigram distribution in nats per token: the cross-entropy loss of the best
     * model that ignores context. A model that learned anything beats it.
     */
    public static double unigramEntropyNats(int[] tokens) {
        if (tokens.length == 0) {
            throw new IllegalArgumentException("no tokens");
        }
        long[] counts = new long[TokenFile.MAX_TOKEN + 1];
        for (int t : tokens) {
            counts[t]++;
        }
        double h = 0;
        for (long c : counts) {
            if (c > 0) {
                double p = (double) c / tokens.length;
                h -= p * Math.log(p);
            }
        }
        return h;
    }

    /** {@link #unigramEntropyNats} in bits. */
    public static double unigramEntropyBits(int[] tokens) {
        return unigramEntropyNats(tokens) / Math.log(2);
    }

    /** ASCII text as byte-level tokens. */
    public static int[] tokens(String text) {
        byte[] bytes = text.getBytes(StandardCharsets.ISO_8859_1);
        int[] out = new int[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            out[i] = bytes[i] & 0xFF;
        }
        return out;
    }
}
