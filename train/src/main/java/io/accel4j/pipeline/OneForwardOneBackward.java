package io.accel4j.pipeline;

import java.util.ArrayList;
import java.util.List;

/**
 * The 1F1B schedule (PipeDream-Flush, Megatron's non-interleaved schedule): stage s of P runs {@code P − 1 − s}
 * warm-up forwards, then alternates one forward and one backward, then runs the backwards left. Stage s computes at most
 * {@code P − s} forwards ahead of their backwards (GPipe M), so it holds at most P micro-batches' activations (one more
 * than P − s where the next input is received ahead), for the same bubble (P−1)/(M+P−1). Needs M ≥ P.
 */
public final class OneForwardOneBackward implements Schedule {

    OneForwardOneBackward() {
    }

    @Override
    public String name() {
        return "1f1b";
    }

    @Override
    public void check(int stages, int micro) {
        Schedule.super.check(stages, micro);
        if (micro < stages) {
            throw new IllegalArgumentException("1F1B needs at least as many micro-batches as stages: got "
                    + micro + " micro-batches for " + stages + " stages");
        }
    }

    @Override
    public List<Action> actions(int stage, int stages, int micro) {
        check(stages, micro);
        int warm = Math.min(stages - 1 - stage, micro);
        List<Action> a = new ArrayList<>(2 * micro);
        for (int m = 0; m < warm; m++) {
            a.add(new Action(true, m));
        }
        for (int m = warm; m < micro; m++) {
            a.add(new Action(true, m));
            a.add(new Action(false, m - warm));
        }
        for (int m = micro - warm; m < micro; m++) {
            a.add(new Action(false, m));
        }
        return a;
    }

    @Override
    public String toString() {
        return name();
    }
}
