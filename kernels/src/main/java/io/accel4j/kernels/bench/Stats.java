package io.accel4j.kernels.bench;

import java.util.Arrays;

/**
 * The median and the minimum of a case's timed samples (milliseconds per call), and how many there were. The median
 * is the figure reported (robust to the odd slow sample: a clock change, another process); the minimum is the best
 * the kernel did.
 */
public record Stats(double medianMs, double minMs, int samples) {

    public Stats {
        if (samples < 1 || !(minMs > 0) || !(medianMs >= minMs)) {
            throw new IllegalArgumentException("need samples >= 1 and 0 < min <= median, got " + samples + ", min "
                    + minMs + ", median " + medianMs);
        }
    }

    /** Of {@code ms} (at least one sample, each finite and > 0); the median of an even count is the mean of the two middle. */
    public static Stats of(double[] ms) {
        if (ms.length == 0) {
            throw new IllegalArgumentException("no samples");
        }
        double[] s = ms.clone();
        Arrays.sort(s);
        if (!(s[0] > 0) || !Double.isFinite(s[s.length - 1])) {
            throw new IllegalArgumentException("samples must be finite and > 0 ms, got " + Arrays.toString(ms));
        }
        int mid = s.length / 2;
        double median = s.length % 2 == 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
        return new Stats(median, s[0], s.length);
    }
}
