package io.accel4j.kernels.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Runs cases in order within a {@link Budget}: each is prepared, measured and freed; a case that throws becomes an
 * {@link Result.Status#ERROR} row (its message) and the rest still run; once the budget is spent the remaining cases
 * are {@link Result.Status#SKIPPED}. Every result goes to {@code listener} as soon as it is known (progress, and a
 * file that survives a run killed by a timeout).
 */
public final class BenchRunner {

    static final String BUDGET_SPENT = "time budget spent";

    private BenchRunner() {}

    public static List<Result> run(List<Case> cases, Measurement.Timer timer, Budget budget,
                                   Consumer<Result> listener) {
        List<Result> results = new ArrayList<>();
        for (Case c : cases) {
            Result r = one(c, timer, budget);
            results.add(r);
            listener.accept(r);
        }
        return results;
    }

    private static Result one(Case c, Measurement.Timer timer, Budget budget) {
        if (c.skipReason() != null) {
            return Result.notRun(c, Result.Status.SKIPPED, c.skipReason());
        }
        if (budget.spent()) {
            return Result.notRun(c, Result.Status.SKIPPED, BUDGET_SPENT);
        }
        try (Case.Prepared p = c.prepare().get()) {
            return Result.ok(c, Measurement.measure(p::run, timer, budget));
        } catch (RuntimeException | OutOfMemoryError e) {
            return Result.notRun(c, Result.Status.ERROR, message(e));
        }
    }

    /** The first line of the message, with the exception's simple name when there is no message. */
    static String message(Throwable e) {
        String m = e.getMessage();
        if (m == null || m.isBlank()) {
            return e.getClass().getSimpleName();
        }
        return m.lines().findFirst().orElse(m);
    }
}
