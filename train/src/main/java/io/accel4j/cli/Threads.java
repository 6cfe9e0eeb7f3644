package io.accel4j.cli;

import java.io.PrintWriter;

/** {@code --threads}: more kernel threads than processors only slow a run down, so a larger request is capped. */
public final class Threads {

    private Threads() {}

    /**
     * {@code requested} (null: not given, left to the command's default) at most the processors available to this
     * JVM; a larger request is capped, with a one-line warning on {@code err}.
     */
    public static Integer cap(Integer requested, PrintWriter err) {
        return cap(requested, Runtime.getRuntime().availableProcessors(), err);
    }

    static Integer cap(Integer requested, int available, PrintWriter err) {
        if (requested == null || requested <= available) {
            return requested;
        }
        err.println("accel4j: warning: --threads " + requested + " is more than the " + available + " processor"
                + (available == 1 ? "" : "s") + " available: using " + available);
        err.flush();
        return available;
    }
}
