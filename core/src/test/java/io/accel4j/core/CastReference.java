package io.accel4j.core;

/**
 * An independent reference for the low-precision formats, written from their definitions with double arithmetic and
 * no bit tricks: a code decodes to {@code sign·2^(e−bias)·(1 + m/2^mbits)} (subnormal {@code sign·m·2^(1−bias−mbits)}),
 * and a float rounds to the nearest point of the format's grid (ties to even, the exponent unbounded above), which
 * overflows when it lands above the largest finite value.
 *
 * @param ieeeSpecials exponent all-ones is ±inf (mantissa 0) or NaN (IEEE, E5M2); otherwise only the all-ones code
 *                     is NaN and there is no infinity (E4M3)
 */
record CastReference(String name, int ebits, int mbits, int bias, boolean ieeeSpecials, double max) {

    static final CastReference BF16 = new CastReference("bf16", 8, 7, 127, true, 0x1.fep127);
    static final CastReference FP16 = new CastReference("fp16", 5, 10, 15, true, 65504);
    static final CastReference E4M3 = new CastReference("e4m3", 4, 3, 7, false, 448);
    static final CastReference E5M2 = new CastReference("e5m2", 5, 2, 15, true, 57344);

    /** Exponent of the smallest normal value (also the exponent of the subnormals' grid). */
    int eminNormal() {
        return 1 - bias;
    }

    int codeCount() {
        return 1 << (1 + ebits + mbits);
    }

    /** Decodes {@code code} by the formula; NaN codes give {@link Double#NaN} with the code's sign. */
    double decode(int code) {
        int sign = (code >>> (ebits + mbits)) & 1;
        int e = (code >>> mbits) & ((1 << ebits) - 1);
        int m = code & ((1 << mbits) - 1);
        int eAllOnes = (1 << ebits) - 1;
        double magnitude;
        if (ieeeSpecials && e == eAllOnes) {
            magnitude = m == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else if (!ieeeSpecials && e == eAllOnes && m == (1 << mbits) - 1) {
            magnitude = Double.NaN;
        } else if (e == 0) {
            magnitude = m * Math.pow(2, 1 - bias - mbits);
        } else {
            magnitude = Math.pow(2, e - bias) * (1 + m / Math.pow(2, mbits));
        }
        return Math.copySign(magnitude, sign == 1 ? -1.0 : 1.0); // sets the sign bit of a NaN too
    }

    /** {@link #decode} for every code, indexed by code. */
    double[] decodeTable() {
        double[] t = new double[codeCount()];
        for (int c = 0; c < t.length; c++) {
            t[c] = decode(c);
        }
        return t;
    }

    /** Powers of two 2^k for k in [POW_MIN, POW_MAX], and their reciprocals, so the rounding loop does no scalb. */
    private static final int POW_MIN = -200, POW_MAX = 200;
    private static final double[] POW2 = new double[POW_MAX - POW_MIN + 1];
    private static final double[] INV_POW2 = new double[POW2.length];

    static {
        for (int k = POW_MIN; k <= POW_MAX; k++) {
            POW2[k - POW_MIN] = Math.scalb(1.0, k);
            INV_POW2[k - POW_MIN] = Math.scalb(1.0, -k);
        }
    }

    /**
     * |x| rounded to the nearest grid point, ties to even, with no upper exponent limit (so the result can exceed
     * {@link #max}: that is overflow). The grid spacing in the binade of |x| is {@code 2^(max(exp(x), emin) − mbits)}.
     * For x = ±inf the result is +inf; x must not be NaN.
     */
    double roundAbs(float x) {
        int e = Math.max(Math.getExponent(x), eminNormal()); // getExponent: -127 for 0 and subnormals, 128 for inf
        int k = e - mbits - POW_MIN;
        double units = Math.abs((double) x) * INV_POW2[k]; // exact: scaling by a power of two, no under/overflow
        return Math.rint(units) * POW2[k];                 // rint ties to even
    }

    /** The grid neighbours of |x| (x finite): {@code {below, above}}, equal when |x| is on the grid. */
    double[] neighboursAbs(float x) {
        int e = Math.max(Math.getExponent(x), eminNormal());
        int k = e - mbits - POW_MIN;
        double units = Math.abs((double) x) * INV_POW2[k];
        return new double[] {Math.floor(units) * POW2[k], Math.ceil(units) * POW2[k]};
    }
}
