package io.accel4j.cli.bench;

import java.util.Arrays;

/** Best and median wall time of a few runs of one call, after untimed warm-up runs. */
record Timing(long bestNanos, long medianNanos) {

    /**
     * Warm-up is over once this many runs in a row, and as much time as it took to reach the best, have not beaten
     * the best by 5%: the JIT compiles after a count of calls and loop trips, so a plateau in the interpreter or C1
     * can last a while before the C2-compiled kernel arrives.
     */
    static final int STABLE_RUNS = 3;

    /** Warm-up never takes longer than this many times {@code warmupMillis}. */
    static final int WARMUP_CAP_FACTOR = 10;

    /** Nor more runs than this (a tiny call on a fast machine). */
    static final int MAX_WARMUP_RUNS = 100_000;

    /**
     * Runs {@code call} untimed at least {@code warmup} times and, when {@code warmupMillis > 0}, for at least that
     * long and until its time has stopped improving (the JIT has compiled the kernel), but no longer than
     * {@link #WARMUP_CAP_FACTOR}·{@code warmupMillis}; then {@code runs} timed times.
     */
    static Timing of(int warmup, long warmupMillis, int runs, Runnable call) {
        if (runs < 1) {
            throw new IllegalArgumentException("runs must be >= 1, got " + runs);
        }
        long start = System.nanoTime();
        long minEnd = start + warmupMillis * 1_000_000;
        long capEnd = start + warmupMillis * 1_000_000 * WARMUP_CAP_FACTOR;
        long best = Long.MAX_VALUE;
        long bestAt = start;
        int sinceBest = 0;
        for (int i = 0; i < MAX_WARMUP_RUNS; i++) {
            long now = System.nanoTime();
            boolean stable = now - minEnd >= 0 && sinceBest >= STABLE_RUNS && now - bestAt >= bestAt - start;
            if (i >= warmup && (warmupMillis == 0 || now - capEnd >= 0 || stable)) {
                break;
            }
            call.run();
            long end = System.nanoTime();
            long t = end - now;
            if (t < best - best / 20) {
                best = t;
                bestAt = end;
                sinceBest = 0;
            } else {
                sinceBest++;
            }
        }
        long[] t = new long[runs];
        for (int i = 0; i < runs; i++) {
            long t0 = System.nanoTime();
            call.run();
            t[i] = Math.max(1, System.nanoTime() - t0);
        }
        Arrays.sort(t);
        return new Timing(t[0], t[(runs - 1) / 2]);
    }

    double bestMillis() {
        return bestNanos / 1e6;
    }

    double medianMillis() {
        return medianNanos / 1e6;
    }

    /** Rate of {@code flops} operations in the best run, in GFLOP/s. */
    double gflops(double flops) {
        return flops / bestNanos;
    }
}
