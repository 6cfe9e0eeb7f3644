package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The schedules' timelines: every micro-batch forwarded then backwarded once per stage; the lockstep bubble equal to
 * (P−1)/(M+P−1); 1F1B keeping at most P micro-batches on any stage (GPipe M); and the communication deadlock-free
 * even when every send and receive blocks until its partner arrives (rendezvous), one at a time per rank.
 */
class TimelineTest {

    @Test
    void everyScheduleRunsEveryMicroBatchOnceWithTheFormulasBubbleAndNoDeadlock() {
        for (Schedule schedule : List.of(Schedule.GPIPE, Schedule.ONE_F_ONE_B)) {
            for (int P = 1; P <= 5; P++) {
                for (int M = schedule == Schedule.ONE_F_ONE_B ? P : 1; M <= 9; M++) {
                    Timeline t = Timeline.of(schedule, P, M);
                    String what = schedule.name() + " P=" + P + " M=" + M;
                    assertThat(t.idealBubble()).as(what).isCloseTo(Timeline.bubbleFormula(P, M), within(1e-12));
                    for (int s = 0; s < P; s++) {
                        List<Timeline.Event> ev = t.events(s);
                        for (int m = 0; m < M; m++) {
                            int mm = m;
                            int f = indexOf(ev, Timeline.Kind.FORWARD, mm), b = indexOf(ev, Timeline.Kind.BACKWARD, mm);
                            assertThat(f).as(what + " stage " + s + " F" + m).isGreaterThanOrEqualTo(0);
                            assertThat(b).as(what + " stage " + s + " B" + m).isGreaterThan(f);
                            assertThat(ev.stream().filter(e -> e.micro() == mm && (e.kind() == Timeline.Kind.FORWARD
                                    || e.kind() == Timeline.Kind.BACKWARD)).count()).isEqualTo(2);
                        }
                        int peak = t.peakInFlight(s);
                        if (schedule == Schedule.ONE_F_ONE_B) {
                            // P − s computed ahead of their backward, one more whose input is received ahead
                            assertThat(peak).as(what + " stage " + s).isLessThanOrEqualTo(Math.min(P, P - s + 1));
                            if (s == 0) {
                                assertThat(peak).as(what).isEqualTo(P);
                            }
                        } else if (s == 0) {
                            assertThat(peak).as(what).isEqualTo(M);
                        }
                    }
                    assertThat(runsWithRendezvous(t)).as(what).isTrue();
                }
            }
        }
    }

    @Test
    void oneFOneBRefusesFewerMicroBatchesThanStages() {
        assertThatThrownBy(() -> Timeline.of(Schedule.ONE_F_ONE_B, 4, 3))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("1F1B needs at least as many micro-batches as stages: got 3 micro-batches for 4 stages");
        assertThat(Schedule.named("1F1B")).isSameAs(Schedule.ONE_F_ONE_B);
        assertThatThrownBy(() -> Schedule.named("zigzag")).hasMessageContaining("'zigzag'");
    }

    @Test
    void oneFOneBAlternatesAfterItsWarmUp() {
        assertThat(Schedule.ONE_F_ONE_B.actions(0, 3, 5).toString())
                .isEqualTo("[F0, F1, F2, B0, F3, B1, F4, B2, B3, B4]");
        assertThat(Schedule.ONE_F_ONE_B.actions(2, 3, 5).toString())
                .isEqualTo("[F0, B0, F1, B1, F2, B2, F3, B3, F4, B4]");
        assertThat(Schedule.GPIPE.actions(1, 3, 3).toString()).isEqualTo("[F0, F1, F2, B0, B1, B2]");
    }

    private static int indexOf(List<Timeline.Event> ev, Timeline.Kind k, int m) {
        for (int i = 0; i < ev.size(); i++) {
            if (ev.get(i).kind() == k && ev.get(i).micro() == m) {
                return i;
            }
        }
        return -1;
    }

    /** Each rank runs its events in order, every send and receive blocking until its partner is at it. */
    private static boolean runsWithRendezvous(Timeline t) {
        int P = t.stages();
        int[] at = new int[P];
        List<List<Timeline.Event>> ev = new ArrayList<>();
        for (int s = 0; s < P; s++) {
            ev.add(t.events(s));
        }
        while (true) {
            boolean moved = false, done = true;
            for (int s = 0; s < P; s++) {
                if (at[s] == ev.get(s).size()) {
                    continue;
                }
                done = false;
                Timeline.Event e = ev.get(s).get(at[s]);
                switch (e.kind()) {
                    case FORWARD, BACKWARD -> {
                        at[s]++;
                        moved = true;
                    }
                    case SEND_ACTIVATION -> moved |= meet(ev, at, s, s + 1, Timeline.Kind.RECV_ACTIVATION, e);
                    case SEND_GRADIENT -> moved |= meet(ev, at, s, s - 1, Timeline.Kind.RECV_GRADIENT, e);
                    default -> { } // a receive waits for its sender's turn
                }
            }
            if (done) {
                return true;
            }
            if (!moved) {
                return false;
            }
        }
    }

    private static boolean meet(List<List<Timeline.Event>> ev, int[] at, int s, int peer, Timeline.Kind want,
                                Timeline.Event send) {
        if (at[peer] == ev.get(peer).size()) {
            return false;
        }
        Timeline.Event r = ev.get(peer).get(at[peer]);
        if (r.kind() != want || r.micro() != send.micro()) {
            return false;
        }
        at[s]++;
        at[peer]++;
        return true;
    }
}
