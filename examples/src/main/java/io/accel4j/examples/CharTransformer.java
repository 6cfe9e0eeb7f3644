package io.accel4j.examples;

import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.nn.Embedding;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.LmHead;
import io.accel4j.nn.Module;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.TransformerBlock;
import io.accel4j.nn.VocabParallelEmbedding;
import io.accel4j.nn.VocabParallelHead;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * A character-level transformer with an untied head, trained on a small public-domain text that ships with the
 * examples: embedding (tokens and positions), two pre-LayerNorm blocks, a final LayerNorm and its own LM head. Prints
 * the train loss as it goes, the held-out loss against the uniform guess ln V, and a greedy continuation.
 */
@Command(name = "chars", mixinStandardHelpOptions = true,
        description = "A character-level transformer (untied head) learns a small text; prints losses and a sample.")
public final class CharTransformer implements java.util.concurrent.Callable<Integer> {

    @Mixin
    TrainingOptions run = new TrainingOptions(500, 3e-3f, 11);

    @Option(names = "--batch", description = "Sequences per rank and step (default ${DEFAULT-VALUE}).")
    int batch = 8;

    @Option(names = "--seq", description = "Characters per sequence (default ${DEFAULT-VALUE}).")
    int seq = 64;

    @Option(names = "--tp", description = "Tensor parallelism: the blocks, embedding and head split over T of the "
            + "--ranks (which must be a multiple of T); the held-out loss and the sample, which run rank 0's network "
            + "alone, are then skipped (default ${DEFAULT-VALUE}).")
    int tp = 1;

    /** The result of a run: the final train loss, the held-out loss, and ln V (the uniform guess's loss). */
    public record Result(double trainLoss, double valLoss, double uniform) {}

    @Override
    public Integer call() {
        run(System.out);
        return 0;
    }

    /** Trains, evaluates and samples, printing to {@code out}. */
    public Result run(PrintStream out) {
        run.check();
        int steps = run.steps;
        long seed = run.seed;
        Examples.check(batch >= 1 && seq >= 2, "--batch must be >= 1 and --seq >= 2, got " + batch + ", " + seq);
        String text = corpus();
        List<Character> alphabet = new ArrayList<>(new TreeSet<>(text.chars().mapToObj(c -> (char) c).toList()));
        int V = alphabet.size();
        int[] ids = text.chars().map(c -> alphabet.indexOf((char) c)).toArray();
        int split = ids.length * 9 / 10;
        int[] train = java.util.Arrays.copyOf(ids, split), val = java.util.Arrays.copyOfRange(ids, split, ids.length);
        Examples.check(val.length > seq + 1, "--seq " + seq + " is longer than the held-out text");
        int C = 64, NH = 4, L = 2;
        Examples.check(tp >= 1 && NH % tp == 0, "--tp must divide the 4 heads, got " + tp);
        try (Learner learner = run.applyTo(Learner.of(() -> tp == 1 ? model(V, C, NH, L, seq)
                        : parallelModel(V, C, NH, L, seq))
                .tokens(V).classes(V).batch(batch, seq), 0.1f).tensorParallel(tp)
                .schedule(LrSchedule.warmupCosine(run.lr, steps / 10, steps, 0.1f)).gradClip(1f)
                .data((rank, n, B, T) -> windows(train, B, T, seed * 1000 + rank))
                .progress(new java.io.PrintWriter(out, true)).build()) {
            out.println("text: " + ids.length + " characters, " + V + " distinct; " + learner.describe());
            List<StepMetrics> metrics = learner.fit(steps, null);
            double last = metrics.get(metrics.size() - 1).trainLoss();
            if (tp > 1) {
                out.printf("final train loss %.4f (uniform guess ln %d = %.4f); held-out loss and sample skipped "
                        + "under --tp%n", last, V, Math.log(V));
                return new Result(last, Double.NaN, Math.log(V));
            }
            double valLoss = learner.evaluate(windows(val, batch, seq, seed + 99), 4);
            out.printf("held-out loss %.4f (uniform guess ln %d = %.4f), final train loss %.4f%n", valLoss, V,
                    Math.log(V), last);
            out.println("sample: " + sample(learner, alphabet, train, 80));
            return new Result(last, valLoss, Math.log(V));
        }
    }

    /** Embedding, L blocks, the final LayerNorm and an untied head. */
    static Module model(int V, int C, int NH, int L, int maxT) {
        List<Module> parts = new ArrayList<>();
        parts.add(Embedding.tokensAndPositions("embed", V, C, maxT));
        for (int l = 0; l < L; l++) {
            parts.add(new TransformerBlock("h" + l, C, NH));
        }
        parts.add(new LayerNorm("ln_f", C));
        parts.add(LmHead.untied("lm_head", C, V));
        return new Sequential("chars", parts);
    }

    /**
     * {@link #model} split over the network's tensor group: the embedding and the untied head by vocabulary (the
     * vocabulary padded to a multiple of 4 rows, which every tensor layout the 4 heads allow divides), the blocks
     * Megatron-LM's way ({@link TransformerBlock#parallel}). On one rank, the same function as {@link #model}.
     */
    static Module parallelModel(int V, int C, int NH, int L, int maxT) {
        int rows = (V + 3) / 4 * 4;
        List<Module> parts = new ArrayList<>();
        parts.add(new VocabParallelEmbedding("embed", V, rows, C, maxT, false));
        for (int l = 0; l < L; l++) {
            parts.add(TransformerBlock.parallel("h" + l, C, NH, 4 * C));
        }
        parts.add(new LayerNorm("ln_f", C));
        parts.add(VocabParallelHead.untied("lm_head", C, rows));
        return new Sequential("chars", parts);
    }

    /** Random windows of T + 1 characters of {@code ids}: the inputs and their next characters. */
    static DataSource windows(int[] ids, int B, int T, long seed) {
        Random r = new Random(seed);
        return (inputs, targets) -> {
            for (int b = 0; b < B; b++) {
                int at = r.nextInt(ids.length - T);
                for (int t = 0; t < T; t++) {
                    inputs.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, (long) b * T + t, ids[at + t]);
                    targets.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, (long) b * T + t, ids[at + t + 1]);
                }
            }
        };
    }

    /** A greedy continuation of the first characters of the text. */
    private String sample(Learner learner, List<Character> alphabet, int[] train, int n) {
        int T = learner.network().maxT();
        List<Integer> context = new ArrayList<>();
        for (int i = 0; i < Math.min(16, train.length); i++) {
            context.add(train[i]);
        }
        StringBuilder s = new StringBuilder();
        context.forEach(i -> s.append(alphabet.get(i)));
        s.append('|');
        try (Arena a = Arena.ofConfined()) {
            MemorySegment in = a.allocate((long) T * Integer.BYTES);
            for (int k = 0; k < n; k++) {
                int len = Math.min(T, context.size());
                for (int t = 0; t < len; t++) {
                    in.setAtIndex(ValueLayout.JAVA_INT, t, context.get(context.size() - len + t));
                }
                int[] next = learner.predict(in, 1, len);
                int c = next[len - 1];
                context.add(c);
                s.append(alphabet.get(c));
            }
        }
        return s.toString().replace('\n', ' ');
    }

    static String corpus() {
        try (InputStream in = CharTransformer.class.getResourceAsStream("corpus.txt")) {
            if (in == null) {
                throw new IllegalStateException("corpus.txt is missing from the examples jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
