package io.accel4j.kernels.bench;

import java.util.Objects;
import java.util.function.Supplier;

/**
 * One benchmark: what it is (group, kernel, shape), the work of one call (FLOP, or bytes for {@link Ceiling#HBM}),
 * and how to set it up: {@code prepare} allocates and fills its inputs and returns the call to time. A case that
 * cannot run here carries the reason instead ({@link #skip}).
 */
public record Case(String group, String kernel, String shape, double work, Ceiling ceiling,
                   Supplier<Prepared> prepare, String skipReason) {

    /** The call to time, and what to free after. */
    public interface Prepared extends AutoCloseable {
        void run();

        @Override
        void close();

        /** {@code call} to time, {@code free} to run once after. */
        static Prepared of(Runnable call, Runnable free) {
            return new Prepared() {
                @Override
                public void run() {
                    call.run();
                }

                @Override
                public void close() {
                    free.run();
                }
            };
        }
    }

    public Case {
        Objects.requireNonNull(group, "group");
        Objects.requireNonNull(kernel, "kernel");
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(ceiling, "ceiling");
        if (skipReason == null && (prepare == null || !(work > 0))) {
            throw new IllegalArgumentException("a case to run needs prepare and work > 0, got work " + work);
        }
    }

    public static Case of(String group, String kernel, String shape, double work, Ceiling ceiling,
                          Supplier<Prepared> prepare) {
        return new Case(group, kernel, shape, work, ceiling, prepare, null);
    }

    public static Case skip(String group, String kernel, String shape, Ceiling ceiling, String reason) {
        return new Case(group, kernel, shape, 0, ceiling, null, Objects.requireNonNull(reason, "reason"));
    }
}
