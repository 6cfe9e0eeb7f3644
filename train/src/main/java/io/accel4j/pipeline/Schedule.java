package io.accel4j.pipeline;

import java.util.List;

/**
 * The order in which one pipeline stage runs the forwards and backwards of a global batch's M micro-batches (a
 * strategy: {@link GPipe}, {@link OneForwardOneBackward}). Each stage's list holds every micro-batch's forward before
 * its backward; the forwards are in micro-batch order, and so are the backwards, so gradients accumulate in the same
 * order on every stage. The communication between stages is derived from the lists by the {@link Timeline}.
 */
public interface Schedule {

    /** GPipe: all forwards, then all backwards. */
    Schedule GPIPE = new GPipe();

    /** 1F1B: warm-up forwards, one forward one backward in the steady state, then the remaining backwards. */
    Schedule ONE_F_ONE_B = new OneForwardOneBackward();

    /** A forward ({@code forward}) or backward of micro-batch {@code micro}. */
    record Action(boolean forward, int micro) {
        @Override
        public String toString() {
            return (forward ? "F" : "B") + micro;
        }
    }

    /** The name the CLI takes ({@code gpipe}, {@code 1f1b}). */
    String name();

    /** Stage {@code stage}'s actions, of {@code stages} stages and {@code micro} micro-batches. */
    List<Action> actions(int stage, int stages, int micro);

    /**
     * Throws {@link IllegalArgumentException} naming the numbers when this schedule cannot run {@code micro}
     * micro-batches over {@code stages} stages.
     */
    default void check(int stages, int micro) {
        if (stages < 1 || micro < 1) {
            throw new IllegalArgumentException("a pipeline needs at least 1 stage and 1 micro-batch, got " + stages
                    + " stages and " + micro + " micro-batches");
        }
    }

    /** The schedule named {@code name} ({@code gpipe} or {@code 1f1b}, any case). */
    static Schedule named(String name) {
        return switch (name.toLowerCase(java.util.Locale.ROOT)) {
            case "gpipe" -> GPIPE;
            case "1f1b" -> ONE_F_ONE_B;
            default -> throw new IllegalArgumentException("unknown pipeline schedule '" + name
                    + "': use gpipe or 1f1b");
        };
    }
}
