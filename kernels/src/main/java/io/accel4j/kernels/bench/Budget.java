package io.accel4j.kernels.bench;

import java.util.function.LongSupplier;

/**
 * Wall-clock limits of a benchmark run: a total for the whole set ({@code totalNanos} from creation) and a share per
 * case. A case measures until its share is spent (and it has its minimum of samples), never past the total; once
 * the total is spent the remaining cases are not run. The clock is a parameter so that tests can drive it.
 */
public final class Budget {

    private final LongSupplier clock;
    private final long end;
    private final long perCaseNanos;

    /** {@code clock} in nanoseconds ({@code System::nanoTime}). */
    public Budget(LongSupplier clock, long totalNanos, long perCaseNanos) {
        if (totalNanos < 1 || perCaseNanos < 1) {
            throw new IllegalArgumentException("budgets must be >= 1 ns, got total " + totalNanos + ", per case "
                    + perCaseNanos);
        }
        this.clock = clock;
        this.end = clock.getAsLong() + totalNanos;
        this.perCaseNanos = perCaseNanos;
    }

    /** Seconds as nanoseconds. */
    public static long nanos(double seconds) {
        return Math.round(seconds * 1e9);
    }

    public long now() {
        return clock.getAsLong();
    }

    /** Whether the total is spent. */
    public boolean spent() {
        return now() - end >= 0;
    }

    /** When a case starting now must stop: its share, or the end of the total if that comes first. */
    public long caseDeadline() {
        long now = now();
        return end - now < perCaseNanos ? end : now + perCaseNanos;
    }

    /** Seconds left of the total (≥ 0). */
    public double secondsLeft() {
        return Math.max(0, end - now()) / 1e9;
    }
}
