package io.accel4j.cpu.ref;

/**
 * The plain-Java reference of {@link io.accel4j.cpu.ops.FusedClassifier}: softmax cross-entropy per row in float64.
 *
 * <p>{@code logits (N, Vp)}, only columns {@code [0, V)} used; {@code targets (N)} in {@code [0, V)};
 * {@code losses (N)}. Per row: {@code losses[i] = log Σ_j exp(x[j] − max) + max − x[t]}; the backward writes
 * {@code (softmax(x)[j] − [j = t])·dlossScale} for {@code j < V} and 0 for the padding. The returned mean is
 * {@code Σ losses / N}.
 */
public final class ClassifierRef {

    private ClassifierRef() {}

    /** Writes {@code losses}; returns their mean. Logits are only read (the padding never). */
    public static double forward(double[] losses, double[] logits, int[] targets, int N, int V, int Vp) {
        double sum = 0;
        for (int i = 0; i < N; i++) {
            losses[i] = rowLoss(logits, i * Vp, V, targets[i]);
            sum += losses[i];
        }
        return sum / N;
    }

    /** The forward, then in place {@code logits[i, j] = (softmax − onehot)·dlossScale}, padding 0. */
    public static double forwardBackward(double[] logits, double[] losses, int[] targets, int N, int V, int Vp,
                                         double dlossScale) {
        double mean = forward(losses, logits, targets, N, V, Vp);
        for (int i = 0; i < N; i++) {
            int base = i * Vp;
            double max = rowMax(logits, base, V);
            double sum = 0;
            for (int j = 0; j < V; j++) {
                sum += Math.exp(logits[base + j] - max);
            }
            for (int j = 0; j < V; j++) {
                double p = Math.exp(logits[base + j] - max) / sum;
                logits[base + j] = (p - (j == targets[i] ? 1 : 0)) * dlossScale;
            }
            for (int j = V; j < Vp; j++) {
                logits[base + j] = 0;
            }
        }
        return mean;
    }

    /** {@code −log softmax(logits[base : base+V])[t]}. */
    static double rowLoss(double[] logits, int base, int V, int t) {
        double max = rowMax(logits, base, V);
        double sum = 0;
        for (int j = 0; j < V; j++) {
            sum += Math.exp(logits[base + j] - max);
        }
        return Math.log(sum) + max - logits[base + t];
    }

    static double rowMax(double[] logits, int base, int V) {
        double max = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < V; j++) {
            max = Math.max(max, logits[base + j]);
        }
        return max;
    }
}
