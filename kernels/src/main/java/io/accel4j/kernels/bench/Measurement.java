package io.accel4j.kernels.bench;

import java.util.Arrays;

/**
 * How one case is timed: a first call (lazy set-up: JIT, plans, scratch buffers; not a sample), a warm-up of
 * {@value #WARMUP_MS} ms of GPU time (clocks up, caches warm), then samples until the case's share of the
 * {@link Budget} is spent, with at least {@value #MIN_SAMPLES} and at most {@value #MAX_SAMPLES}. Each sample times
 * {@code inner} calls back to back, enough for {@value #SAMPLE_MS} ms, so that kernels of a few microseconds are
 * not lost in the event resolution (~0.5 µs) and the launch gaps; a sample is its time divided by {@code inner}.
 * Once the whole budget is spent a case stops at one sample.
 */
public final class Measurement {

    /** Runs {@code op} {@code times} times back to back and returns the total time in ms (GPU time: CUDA events). */
    @FunctionalInterface
    public interface Timer {
        double millis(Runnable op, int times);
    }

    static final double WARMUP_MS = 100;
    static final double SAMPLE_MS = 2;
    static final int MIN_SAMPLES = 3;
    static final int MAX_SAMPLES = 100;
    static final int MAX_INNER = 1000;

    private Measurement() {}

    /** The per-call statistics of {@code op}. */
    public static Stats measure(Runnable op, Timer timer, Budget budget) {
        long deadline = budget.caseDeadline();
        double perCall = timer.millis(op, 1);
        int inner = inner(perCall);
        for (double warmed = 0; warmed < WARMUP_MS && budget.now() - deadline < 0; ) {
            double t = timer.millis(op, inner);
            warmed += t;
            inner = inner(t / inner);
        }
        double[] samples = new double[MAX_SAMPLES];
        int n = 0;
        while (n < MAX_SAMPLES && (n < MIN_SAMPLES || budget.now() - deadline < 0)) {
            if (n >= 1 && budget.spent()) {
                break;
            }
            samples[n++] = timer.millis(op, inner) / inner;
        }
        return Stats.of(Arrays.copyOf(samples, n));
    }

    /** Calls per sample for a call of {@code perCallMs}: enough for {@value #SAMPLE_MS} ms, 1 to {@value #MAX_INNER}. */
    static int inner(double perCallMs) {
        if (!(perCallMs > 0)) {
            return MAX_INNER;
        }
        return (int) Math.max(1, Math.min(MAX_INNER, Math.ceil(SAMPLE_MS / perCallMs)));
    }
}
