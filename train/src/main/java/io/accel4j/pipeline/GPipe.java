package io.accel4j.pipeline;

import java.util.ArrayList;
import java.util.List;

/**
 * GPipe's schedule: every micro-batch's forward, then every backward; a stage keeps all M micro-batches' activations
 * until its first backward. Bubble (P−1)/(M+P−1) of the step when forwards and backwards take the same time on each
 * stage.
 */
public final class GPipe implements Schedule {

    GPipe() {
    }

    @Override
    public String name() {
        return "gpipe";
    }

    @Override
    public List<Action> actions(int stage, int stages, int micro) {
        check(stages, micro);
        List<Action> a = new ArrayList<>(2 * micro);
        for (int m = 0; m < micro; m++) {
            a.add(new Action(true, m));
        }
        for (int m = 0; m < micro; m++) {
            a.add(new Action(false, m));
        }
        return a;
    }

    @Override
    public String toString() {
        return name();
    }
}
