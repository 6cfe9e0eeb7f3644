package io.accel4j.train.plan;

import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;

/**
 * A step-time estimate: compute plus communication, not overlapped (an upper bound; a real run overlaps the
 * gradient buckets with backward). Compute: the transformer's FLOPs per token, {@code 6Ψ + 12·L·C·T} for forward and
 * backward (Kaplan et al.'s count with attention), plus a second forward of the layers ({@code 2Ψ_blocks} per token)
 * with {@code --recompute layer} (GELU's recompute is elementwise and not counted), split evenly over the devices at
 * {@link Cluster#flops()} each. Communication: the bytes each device sends in ring collectives at
 * {@link Cluster#bandwidth()}.
 *
 * @param computeSeconds the FLOPs' time
 * @param commSeconds    the collectives' time
 */
public record StepTime(double computeSeconds, double commSeconds) {

    /** The estimate in all. */
    public double seconds() {
        return computeSeconds + commSeconds;
    }

    /**
     * FLOPs of one step of {@code sequences} sequences of {@code T} tokens, forward and backward, with
     * {@code recompute}'s extra forward.
     */
    public static double flops(GptConfig c, int T, long sequences, Recompute recompute) {
        double psi = c.parameterCount();
        double blocks = 12.0 * c.L() * (double) c.C() * c.C(); // the layers' matmul weights
        double perToken = 6 * psi + 12.0 * c.L() * c.C() * T;
        if (recompute.holdsLayers()) { // one more forward of the layers; every:K's segments a second one
            perToken += (recompute.segment() > 0 ? 4 : 2) * blocks;
        }
        return perToken * sequences * T;
    }

    /**
     * Bytes each of {@code n} ranks sends per step for ZeRO stage {@code stage} over Ψ fp32 parameters with
     * {@code accumulation} micro-batches (ring collectives, {@code (n−1)/n} of the data each): stage 0 and 1 average
     * the gradients once per step (all-reduce, 2Ψ; stage 1 as reduce-scatter + all-gather of the updated
     * parameters, also 2Ψ); stage 2 reduce-scatters every micro-batch's gradients (Ψ each) and all-gathers the
     * parameters once (Ψ); stage 3 also all-gathers the parameters for each micro-batch's forward and backward
     * (2Ψ each), the ZeRO paper's 1.5× of DDP at K = 1.
     */
    public static double commBytes(long psi, int n, int stage, int accumulation) {
        if (n == 1) {
            return 0;
        }
        double share = 4.0 * psi * (n - 1) / n;
        return share * switch (stage) {
            case 0, 1 -> 2;
            case 2 -> accumulation + 1;
            default -> 3.0 * accumulation;
        };
    }
}
