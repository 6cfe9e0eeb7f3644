package io.accel4j.pipeline;

import java.util.ArrayList;
import java.util.List;

/**
 * A split of L layers into P contiguous stages, balanced by a cost per layer (parameters, or measured time): of all
 * splits with at least one layer per stage, one whose most expensive stage is cheapest (ties: the earliest such split,
 * found by dynamic programming over prefixes). Stage s holds layers {@code [from(s), to(s))}.
 */
public final class Partition {

    private final int[] bounds; // P + 1 boundaries, bounds[0] = 0, bounds[P] = L
    private final long[] costs;

    private Partition(int[] bounds, long[] costs) {
        this.bounds = bounds;
        this.costs = costs;
    }

    /**
     * The balanced split of layers costing {@code cost} into {@code stages} stages.
     *
     * @throws IllegalArgumentException when there are more stages than layers (naming both numbers)
     */
    public static Partition balanced(long[] cost, int stages) {
        int L = cost.length;
        if (stages < 1) {
            throw new IllegalArgumentException("a pipeline needs at least 1 stage, got " + stages);
        }
        if (stages > L) {
            throw new IllegalArgumentException(stages + " pipeline stages are more than the model's " + L
                    + " layers: each stage needs at least one");
        }
        long[] prefix = new long[L + 1];
        for (int i = 0; i < L; i++) {
            prefix[i + 1] = prefix[i] + cost[i];
        }
        // best[p][i]: the cheapest most expensive stage splitting the first i layers into p stages; cut[p][i] its last cut
        long[][] best = new long[stages + 1][L + 1];
        int[][] cut = new int[stages + 1][L + 1];
        for (long[] row : best) {
            java.util.Arrays.fill(row, Long.MAX_VALUE);
        }
        best[0][0] = 0;
        for (int p = 1; p <= stages; p++) {
            for (int i = p; i <= L; i++) {
                for (int j = p - 1; j < i; j++) {
                    if (best[p - 1][j] == Long.MAX_VALUE) {
                        continue;
                    }
                    long v = Math.max(best[p - 1][j], prefix[i] - prefix[j]);
                    if (v < best[p][i]) {
                        best[p][i] = v;
                        cut[p][i] = j;
                    }
                }
            }
        }
        int[] bounds = new int[stages + 1];
        bounds[stages] = L;
        for (int p = stages; p > 0; p--) {
            bounds[p - 1] = cut[p][bounds[p]];
        }
        return new Partition(bounds, cost.clone());
    }

    public int stages() {
        return bounds.length - 1;
    }

    /** Stage {@code s}'s first layer. */
    public int from(int s) {
        return bounds[s];
    }

    /** One past stage {@code s}'s last layer. */
    public int to(int s) {
        return bounds[s + 1];
    }

    /** Stage {@code s}'s cost. */
    public long cost(int s) {
        long c = 0;
        for (int i = from(s); i < to(s); i++) {
            c += costs[i];
        }
        return c;
    }

    /** One line per stage: its layers (named by {@code names}) and cost, e.g. {@code stage 0: embedding, h.0-h.1 (…)}. */
    public List<String> describe(java.util.function.IntFunction<String> names, String unit) {
        List<String> lines = new ArrayList<>();
        for (int s = 0; s < stages(); s++) {
            String layers = to(s) - from(s) == 1 ? names.apply(from(s))
                    : names.apply(from(s)) + " … " + names.apply(to(s) - 1);
            lines.add("stage " + s + ": layers " + from(s) + "-" + (to(s) - 1) + " (" + layers + "), " + cost(s)
                    + " " + unit);
        }
        return lines;
    }
}
