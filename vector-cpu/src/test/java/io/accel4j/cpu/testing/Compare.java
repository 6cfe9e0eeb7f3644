package io.accel4j.cpu.testing;

import static org.assertj.core.api.Assertions.fail;

/** Element-wise comparison with a mixed tolerance, reporting the worst element and the seed. */
public final class Compare {

    private Compare() {}

    /**
     * Every {@code actual[i]} is within {@code abs + rel·|expected[i]|} of {@code expected[i]}; NaN anywhere fails.
     *
     * @param what names the buffer and the case (sizes, seed) in a failure message
     */
    public static void close(String what, double[] actual, double[] expected, double rel, double abs) {
        if (actual.length != expected.length) {
            fail(what + ": length " + actual.length + " != " + expected.length);
        }
        int worst = -1;
        double worstExcess = 0;
        for (int i = 0; i < actual.length; i++) {
            double err = Math.abs(actual[i] - expected[i]);
            double bound = abs + rel * Math.abs(expected[i]);
            if (!(err <= bound)) { // also catches NaN
                double excess = Double.isNaN(err) ? Double.POSITIVE_INFINITY : err / bound;
                if (worst < 0 || excess > worstExcess) {
                    worst = i;
                    worstExcess = excess;
                }
            }
        }
        if (worst >= 0) {
            fail(String.format("%s: element %d is %s, expected %s (error %.3g > bound %.3g = %.1e + %.1e·|expected|)",
                    what, worst, actual[worst], expected[worst], Math.abs(actual[worst] - expected[worst]),
                    abs + rel * Math.abs(expected[worst]), abs, rel));
        }
    }

    /** The largest |x[i]|, to scale an absolute tolerance to the data. */
    public static double maxAbs(double[] x) {
        double m = 0;
        for (double v : x) {
            m = Math.max(m, Math.abs(v));
        }
        return m;
    }
}
