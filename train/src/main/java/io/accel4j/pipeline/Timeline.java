package io.accel4j.pipeline;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Every stage's computation and communication for one global batch, in the order that stage issues them, derived from
 * a {@link Schedule} by running the stages in lockstep: at each tick every stage whose next action has its input
 * (the previous stage's activation for a forward, the next stage's gradient for a backward) runs it, each action taking
 * one tick. A message gets the tick it is produced at, and both its sender and its receiver issue it at that tick — the
 * receiver posts the receive then, ahead of the computation that needs it, which overlaps the transfer with that
 * stage's work — ordered within a tick by (sender, direction). Every stage therefore issues its communication in one
 * global order, so a communicator that runs each rank's transfers one at a time, even with blocking (rendezvous)
 * sends, cannot deadlock.
 *
 * <p>The lockstep run is also the schedule's ideal: with forwards and backwards of equal length each stage is idle for
 * {@link #idealBubble()} of the step, which is (P−1)/(M+P−1) for GPipe and 1F1B.
 */
public final class Timeline {

    /** What a stage does, in order. */
    public enum Kind { FORWARD, BACKWARD, SEND_ACTIVATION, RECV_ACTIVATION, SEND_GRADIENT, RECV_GRADIENT }

    /** One thing a stage does for micro-batch {@code micro}, at lockstep tick {@code tick}. */
    public record Event(Kind kind, int micro, int tick) {
        @Override
        public String toString() {
            return kind + "(" + micro + ")@" + tick;
        }
    }

    private record Message(int tick, int sender, boolean forward, int micro) {}

    private final int stages;
    private final int micro;
    private final List<List<Event>> events;
    private final int ticks;

    private Timeline(int stages, int micro, List<List<Event>> events, int ticks) {
        this.stages = stages;
        this.micro = micro;
        this.events = events;
        this.ticks = ticks;
    }

    /**
     * The timeline of {@code schedule} over {@code stages} stages and {@code micro} micro-batches.
     *
     * @throws IllegalArgumentException when the schedule cannot run these numbers
     * @throws IllegalStateException    when the schedule's lists cannot all finish (a schedule bug)
     */
    public static Timeline of(Schedule schedule, int stages, int micro) {
        schedule.check(stages, micro);
        List<List<Schedule.Action>> lists = new ArrayList<>();
        for (int s = 0; s < stages; s++) {
            lists.add(schedule.actions(s, stages, micro));
        }
        int[] next = new int[stages];
        int[][] actAt = new int[stages][micro];   // tick stage s produced activation m (forward done)
        int[][] gradAt = new int[stages][micro];  // tick stage s produced gradient m (backward done)
        for (int s = 0; s < stages; s++) {
            java.util.Arrays.fill(actAt[s], -1);
            java.util.Arrays.fill(gradAt[s], -1);
        }
        List<List<Event>> computed = new ArrayList<>();
        for (int s = 0; s < stages; s++) {
            computed.add(new ArrayList<>());
        }
        List<Message> messages = new ArrayList<>();
        int done = 0, total = 2 * stages * micro, tick = 0;
        while (done < total) {
            boolean moved = false;
            for (int s = 0; s < stages; s++) {
                if (next[s] == lists.get(s).size()) {
                    continue;
                }
                Schedule.Action a = lists.get(s).get(next[s]);
                int m = a.micro();
                boolean ready = a.forward() ? s == 0 || ready(actAt[s - 1][m], tick)
                        : actAt[s][m] >= 0 && (s == stages - 1 || ready(gradAt[s + 1][m], tick));
                if (!ready) {
                    continue;
                }
                if (a.forward()) {
                    actAt[s][m] = tick;
                    if (s + 1 < stages) {
                        messages.add(new Message(tick, s, true, m));
                    }
                } else {
                    gradAt[s][m] = tick;
                    if (s > 0) {
                        messages.add(new Message(tick, s, false, m));
                    }
                }
                computed.get(s).add(new Event(a.forward() ? Kind.FORWARD : Kind.BACKWARD, m, tick));
                next[s]++;
                done++;
                moved = true;
            }
            if (!moved) { // nothing ran, so nothing new is ready at the next tick either
                throw new IllegalStateException(schedule.name() + " cannot finish " + micro + " micro-batches over "
                        + stages + " stages: stuck at tick " + tick);
            }
            tick++;
        }
        messages.sort(Comparator.comparingInt(Message::tick).thenComparingInt(Message::sender)
                .thenComparing(Message::forward));
        List<List<Event>> out = new ArrayList<>();
        for (int s = 0; s < stages; s++) {
            out.add(merge(s, computed.get(s), messages));
        }
        return new Timeline(stages, micro, List.copyOf(out), tick);
    }

    private static boolean ready(int producedAt, int tick) {
        return producedAt >= 0 && producedAt < tick;
    }

    /** Stage {@code s}'s computations and its messages of each tick after that tick's computation. */
    private static List<Event> merge(int s, List<Event> computed, List<Message> messages) {
        List<Event> out = new ArrayList<>();
        int i = 0;
        for (Event c : computed) {
            while (i < messages.size() && messages.get(i).tick() < c.tick()) {
                add(out, s, messages.get(i++));
            }
            out.add(c);
        }
        while (i < messages.size()) {
            add(out, s, messages.get(i++));
        }
        return List.copyOf(out);
    }

    private static void add(List<Event> out, int s, Message m) {
        if (m.forward()) {
            if (m.sender() == s) {
                out.add(new Event(Kind.SEND_ACTIVATION, m.micro(), m.tick()));
            } else if (m.sender() + 1 == s) {
                out.add(new Event(Kind.RECV_ACTIVATION, m.micro(), m.tick()));
            }
        } else {
            if (m.sender() == s) {
                out.add(new Event(Kind.SEND_GRADIENT, m.micro(), m.tick()));
            } else if (m.sender() - 1 == s) {
                out.add(new Event(Kind.RECV_GRADIENT, m.micro(), m.tick()));
            }
        }
    }

    /** Stage {@code s}'s events, in the order it issues them. */
    public List<Event> events(int s) {
        return events.get(s);
    }

    public int stages() {
        return stages;
    }

    public int microBatches() {
        return micro;
    }

    /** Ticks of the lockstep run. */
    public int ticks() {
        return ticks;
    }

    /** The idle fraction of each stage in the lockstep run: {@code 1 − 2M / ticks}. */
    public double idealBubble() {
        return 1 - 2.0 * micro / ticks;
    }

    /** The bubble formula (P−1)/(M+P−1). */
    public static double bubbleFormula(int stages, int micro) {
        return (stages - 1.0) / (micro + stages - 1.0);
    }

    /**
     * The most micro-batches whose activations stage {@code s} holds at once: from the receive of a forward's input
     * (or the forward, on the first stage) to the end of its backward.
     */
    public int peakInFlight(int s) {
        int alive = 0, peak = 0;
        for (Event e : events.get(s)) {
            if (e.kind() == Kind.RECV_ACTIVATION || e.kind() == Kind.FORWARD && s == 0) {
                peak = Math.max(peak, ++alive);
            } else if (e.kind() == Kind.BACKWARD) {
                alive--;
            }
        }
        return peak;
    }
}
