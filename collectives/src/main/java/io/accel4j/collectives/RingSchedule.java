package io.accel4j.collectives;

import java.util.ArrayList;
import java.util.List;

/**
 * The steps of rank {@code r}'s ring all-reduce over {@code N} chunks ({@link Chunks}), as {@link RingCommunicator}
 * runs them and {@link NcclRing} queues them: each step sends chunk {@link Step#send} to the right neighbour and
 * receives chunk {@link Step#recv} from the left one.
 * <ul>
 *   <li>steps {@code s = 0…N−2} (reduce-scatter, {@link Step#combine}): send {@code (r−s−1) mod N}, receive
 *       {@code (r−s−2) mod N} and combine it into this rank's copy: {@code own op received};</li>
 *   <li>then (AVG only) chunk {@code r}, now fully reduced, is divided by {@code N} once;</li>
 *   <li>steps {@code t = 0…N−2} (all-gather): send {@code (r−t) mod N}, receive {@code (r−1−t) mod N} in place.</li>
 * </ul>
 * A step's {@code recv} on rank {@code r} is always the left neighbour's {@code send} of the same step.
 */
final class RingSchedule {

    private RingSchedule() {}

    /** One ring step of one rank. */
    record Step(int send, int recv, boolean combine) {}

    /** Rank {@code r}'s {@code 2(N−1)} steps, reduce-scatter first. */
    static List<Step> steps(int n, int r) {
        if (n < 1 || r < 0 || r >= n) {
            throw new IllegalArgumentException("rank " + r + " of " + n + " ranks");
        }
        List<Step> steps = new ArrayList<>(2 * (n - 1));
        for (int s = 0; s < n - 1; s++) {
            steps.add(new Step(Math.floorMod(r - s - 1, n), Math.floorMod(r - s - 2, n), true));
        }
        for (int t = 0; t < n - 1; t++) {
            steps.add(new Step(Math.floorMod(r - t, n), Math.floorMod(r - 1 - t, n), false));
        }
        return steps;
    }
}
