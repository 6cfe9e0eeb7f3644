package io.accel4j.collectives;

import java.time.Duration;
import java.util.List;

/**
 * A collective that could not complete: a rank failed or closed its communicator, a rank did not arrive within the
 * timeout, or the ranks called different collectives. The message names the collective, this rank, the rank(s) at
 * fault and the elapsed time; nothing the collective wrote into the output buffers may be used.
 */
public final class CollectiveException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String collective;
    private final transient List<Integer> culprits;
    private final transient Duration elapsed;

    public CollectiveException(String collective, List<Integer> culprits, Duration elapsed, String message,
                               Throwable cause) {
        super(message, cause);
        this.collective = collective;
        this.culprits = List.copyOf(culprits);
        this.elapsed = elapsed;
    }

    /** The collective that failed, e.g. {@code "allReduce"}. */
    public String collective() {
        return collective;
    }

    /** The ranks that failed, left or did not arrive (empty when unknown, e.g. a local error). */
    public List<Integer> culprits() {
        return culprits == null ? List.of() : culprits;
    }

    /** Time from the start of the collective on this rank to the failure. */
    public Duration elapsed() {
        return elapsed;
    }

    /** Formats seconds with millisecond precision: {@code 2.003 s}. */
    static String seconds(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.3f s", nanos / 1e9);
    }
}
