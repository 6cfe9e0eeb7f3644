package io.accel4j.cli.train;

import io.accel4j.train.sample.Sampler;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.data.DefaultDataset;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The end of a run: a summary (losses, speed, time), the loss-curve PNG and, on the generated dataset, a few
 * greedy completions of held-out problems and the accuracy over more of them.
 */
final class Report {

    /** What a run produced. */
    record Outcome(double finalTrainLoss, double finalValLoss, double accuracy, double tokensPerS) {}

    /** Tokens generated per answer: three digits and the newline, and one more to see a model that rambles on. */
    private static final int ANSWER_TOKENS = 5;

    private Report() {}

    /**
     * Prints the summary and writes {@code dir/loss.png}.
     *
     * @param step     the run's last step
     * @param scaler   fp16's loss scaler (its skips and final scale), disabled otherwise
     * @param model    the model's shape (the plot's title)
     * @param sampler  greedy completions from the trained model (null: none; needed with {@code data})
     * @param data     the generated dataset, or null for the user's data (no samples, no accuracy)
     * @param seed     the generated dataset's seed
     * @param samples  completions to show
     * @param problems held-out problems to score
     */
    static Outcome finish(PrintWriter w, int step, LossScaler scaler, GptConfig model, Sampler sampler,
                          List<StepMetrics> history, Progress progress, Path dir, DefaultDataset.Splits data,
                          long seed, int samples, int problems) {
        double trainLoss = Double.NaN, valLoss = Double.NaN;
        int n = 0;
        double sum = 0;
        int tail = Math.max(1, history.size() / 20);
        for (int i = history.size() - 1; i >= 0 && n < tail; i--) {
            if (Double.isFinite(history.get(i).trainLoss())) {
                sum += history.get(i).trainLoss();
                n++;
            }
        }
        if (n > 0) {
            trainLoss = sum / n;
        }
        for (StepMetrics m : history) {
            if (Double.isFinite(m.valLoss())) {
                valLoss = m.valLoss();
            }
        }
        double entropy = data == null ? Double.NaN : DefaultDataset.unigramEntropyNats(data.val());
        w.printf(Locale.ROOT, "done: %d steps in %s, %,.0f tokens/s; train loss %.4f (mean of the last %d steps)%s%n",
                step, Progress.clock(progress.elapsedSeconds()), progress.tokensPerSecond(), trainLoss, n,
                Double.isFinite(valLoss) ? String.format(Locale.ROOT, ", val loss %.4f", valLoss) : "");
        if (scaler.enabled()) {
            w.printf(Locale.ROOT, "fp16 loss scaling: %d of %d steps skipped for overflow, final loss scale %.0f%n",
                    scaler.skippedSteps(), step, scaler.scale());
        }
        if (data != null) {
            w.printf(Locale.ROOT, "the validation text's unigram entropy is %.4f nats/token: a model that ignores the "
                    + "context cannot do better%n", entropy);
        }
        Path png = dir.resolve("loss.png");
        try {
            LossPlot.write(png, history, entropy, "unigram entropy", "accel4j train: " + model);
            w.println("loss curve " + png);
        } catch (IOException | RuntimeException | LinkageError e) {
            w.println("no loss curve (" + e + ")");
        }
        double accuracy = Double.NaN;
        if (data != null && (samples > 0 || problems > 0)) {
            List<DefaultDataset.Problem> held = DefaultDataset.heldOut(seed);
            if (samples > 0) {
                w.println("completions of held-out problems (never seen in training):");
                for (DefaultDataset.Problem p : held.subList(0, Math.min(samples, held.size()))) {
                    String c = sampler.completeLine(p.prompt(), ANSWER_TOKENS);
                    String answer = c.endsWith("\n") ? c.substring(0, c.length() - 1) : c;
                    w.printf("  %-7s %-5s %s%n", p.prompt(), printable(answer),
                            answer.equals(p.answer()) ? "right" : "wrong, " + p.answer());
                }
            }
            if (problems > 0) {
                List<DefaultDataset.Problem> scored = held.subList(0, Math.min(problems, held.size()));
                accuracy = DefaultDataset.accuracy(scored, q -> sampler.completeLine(q, ANSWER_TOKENS));
                w.printf(Locale.ROOT, "accuracy on %d held-out problems: %.1f%%%n", scored.size(),
                        100 * accuracy);
            }
        }
        w.flush();
        return new Outcome(trainLoss, valLoss, accuracy, progress.tokensPerSecond());
    }

    private static String printable(String s) {
        StringBuilder sb = new StringBuilder();
        for (char c : s.toCharArray()) {
            sb.append(c >= 32 && c < 127 ? String.valueOf(c) : String.format("\\x%02x", (int) c));
        }
        return sb.toString();
    }
}
