package io.accel4j.cpu.ref;

/** The plain-Java reference of {@link io.accel4j.cpu.ops.Reductions}, on double[] (the fp32 values widened). */
public final class ReductionsRef {

    private ReductionsRef() {}

    /** {@code Σ x[i]²} in float64, in index order. */
    public static double sumOfSquares(double[] x) {
        double s = 0;
        for (double xi : x) {
            s += xi * xi;
        }
        return s;
    }

    /** Whether any value is NaN or ±inf. */
    public static boolean hasNonFinite(double[] x) {
        for (double xi : x) {
            if (!Double.isFinite(xi)) {
                return true;
            }
        }
        return false;
    }

    /** {@code max |x[i]|}; NaN if any value is NaN; 0 for an empty array. */
    public static double amax(double[] x) {
        double m = 0;
        for (double xi : x) {
            if (Double.isNaN(xi)) {
                return Double.NaN;
            }
            m = Math.max(m, Math.abs(xi));
        }
        return m;
    }
}
