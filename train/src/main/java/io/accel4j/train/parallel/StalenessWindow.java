package io.accel4j.train.parallel;

/**
 * The staleness of the pushes a {@link ParameterServers} applied ({@code c − v}: the updates a gradient of clock
 * {@code c}, computed on version {@code v}, did not see): min, mean and max since the last {@link #drain}, for the
 * metrics, and the largest ever, for the bound's check. Thread-safe.
 */
final class StalenessWindow {

    private int min = Integer.MAX_VALUE;
    private int max;
    private long sum;
    private long count;
    private int maxSeen;

    synchronized void record(int staleness) {
        min = Math.min(min, staleness);
        max = Math.max(max, staleness);
        sum += staleness;
        count++;
        maxSeen = Math.max(maxSeen, staleness);
    }

    /** Merges another window's {@code count} pushes (min, max, sum of their staleness) into this one. */
    synchronized void add(int min, int max, long sum, long count) {
        if (count == 0) {
            return;
        }
        this.min = Math.min(this.min, min);
        this.max = Math.max(this.max, max);
        this.sum += sum;
        this.count += count;
        maxSeen = Math.max(maxSeen, max);
    }

    /** The window since the last call (all zero when empty), and a new window. */
    synchronized ParameterServers.Staleness drain() {
        ParameterServers.Staleness s = count == 0 ? new ParameterServers.Staleness(0, 0, 0, 0)
                : new ParameterServers.Staleness(min, (double) sum / count, max, count);
        min = Integer.MAX_VALUE;
        max = 0;
        sum = 0;
        count = 0;
        return s;
    }

    /** The largest staleness recorded so far. */
    synchronized int maxSeen() {
        return maxSeen;
    }
}
