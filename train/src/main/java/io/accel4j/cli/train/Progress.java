package io.accel4j.cli.train;

import io.accel4j.train.StepMetrics;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Progress lines of a training run: about 25 in all, plus one at every validation and at the last step, each with
 * the step, the train loss and tokens/s (both over the steps since the previous line), the validation loss when
 * computed, the learning rate and the time left.
 */
public final class Progress {

    private final PrintWriter w;
    private final int steps;
    private final int every;
    private final long start = System.nanoTime();
    private final int firstStep;
    private long lastLine = start;
    private int lastLineStep;
    private double lossSum;
    private int lossCount;
    private double msSum;
    private long tokens;
    private double recentMs;
    private long recentTokens;

    /** Lines to {@code w} for a run of {@code steps} steps in all, this part starting at step {@code firstStep}. */
    public Progress(PrintWriter w, int steps, int firstStep) {
        this.w = w;
        this.steps = steps;
        this.firstStep = firstStep;
        this.lastLineStep = firstStep;
        this.every = Math.max(1, Math.round((steps - firstStep) / 25f));
    }

    /** After step {@code m.step()}: a line when one is due. */
    public void step(StepMetrics m) {
        lossSum += m.trainLoss();
        lossCount++;
        long t = Math.round(m.tokensPerS() * m.stepMs() / 1e3);
        msSum += m.stepMs();
        tokens += t;
        recentMs += m.stepMs();
        recentTokens += t;
        int done = m.step() + 1;
        boolean last = done == steps;
        if (!(done % every == 0 || last || m.step() == firstStep || Double.isFinite(m.valLoss()))) {
            return;
        }
        long now = System.nanoTime();
        // the time left from the recent pace (validation included), once past the first, JIT-cold step
        double perStep = (now - lastLine) / 1e9 / Math.max(1, done - lastLineStep);
        String eta = last ? "took " + clock((now - start) / 1e9)
                : done - firstStep < 2 ? "ETA -" : "ETA " + clock(perStep * (steps - done));
        w.printf(Locale.ROOT, "step %5d/%d | loss %.4f%s | lr %.2e%s | %,8.0f tok/s | %s%n", done, steps,
                lossSum / lossCount, Double.isFinite(m.valLoss()) ? String.format(Locale.ROOT, " | val %.4f",
                        m.valLoss()) : "", m.lr(), Float.isFinite(m.lossScale()) ? String.format(Locale.ROOT,
                        " | scale %.0f, %d skipped", m.lossScale(), m.skippedSteps()) : "",
                recentTokens / (recentMs / 1e3), eta);
        w.flush();
        lossSum = 0;
        lossCount = 0;
        recentMs = 0;
        recentTokens = 0;
        lastLine = now;
        lastLineStep = done;
    }

    void done(Path model, Path metrics) {
        w.printf("checkpoint %s, metrics %s%n", model, metrics);
        w.flush();
    }

    /** Average tokens/s over the steps of this run (validation excluded). */
    double tokensPerSecond() {
        return msSum > 0 ? tokens / (msSum / 1e3) : Double.NaN;
    }

    /** Seconds since the first step. */
    double elapsedSeconds() {
        return (System.nanoTime() - start) / 1e9;
    }

    static String clock(double seconds) {
        long s = Math.round(seconds);
        return s >= 3600 ? String.format(Locale.ROOT, "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
                : String.format(Locale.ROOT, "%d:%02d", s / 60, s % 60);
    }
}
