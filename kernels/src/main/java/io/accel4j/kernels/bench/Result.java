package io.accel4j.kernels.bench;

/**
 * The outcome of a {@link Case}: its statistics when it ran ({@link Status#OK}), else why not ({@code detail}).
 * The figures derive from the median (and the minimum for {@link #best}).
 */
public record Result(String group, String kernel, String shape, Status status, String detail, Stats stats,
                     double work, Ceiling ceiling) {

    public enum Status { OK, SKIPPED, ERROR }

    public Result {
        if ((status == Status.OK) != (stats != null)) {
            throw new IllegalArgumentException("stats go with OK, and only with OK: " + status + ", " + stats);
        }
        detail = detail == null ? "" : detail;
    }

    static Result ok(Case c, Stats stats) {
        return new Result(c.group(), c.kernel(), c.shape(), Status.OK, "", stats, c.work(), c.ceiling());
    }

    static Result notRun(Case c, Status status, String detail) {
        return new Result(c.group(), c.kernel(), c.shape(), status, detail, null, c.work(), c.ceiling());
    }

    public boolean ok() {
        return status == Status.OK;
    }

    /** The median figure in {@link Ceiling#unit()} (TFLOP/s or GB/s); NaN unless OK. */
    public double value() {
        return ok() ? ceiling.inUnit(work / (stats.medianMs() / 1e3)) : Double.NaN;
    }

    /** The figure of the fastest sample; NaN unless OK. */
    public double best() {
        return ok() ? ceiling.inUnit(work / (stats.minMs() / 1e3)) : Double.NaN;
    }

    /** The median figure as a fraction of the ceiling; NaN unless OK. */
    public double ofCeiling() {
        return ok() ? work / (stats.medianMs() / 1e3) / ceiling.perSecond() : Double.NaN;
    }
}
