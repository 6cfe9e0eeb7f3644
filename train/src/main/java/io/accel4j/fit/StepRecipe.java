package io.accel4j.fit;

import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.precision.LossScaler;

/**
 * One rank's optimizer step ({@code RankStep}'s, for every strategy and for {@code accel4j train}): zero the
 * gradients, K micro-batches of forward and backward (each scaled by {@code 1/(B·T·K)} times the loss scale), the
 * gradient reduction, the loss averaged over the ranks, the overflow check (fp16), the global norm and clipping folded
 * into the update's gradient scale, the update at the schedule's rate (skipped on overflow), the loss scaler's
 * bookkeeping, and the FP8 scales' update from the ranks' maximum amaxes. What the model, the data and the ranks are
 * is the {@link Parts}' business alone.
 */
public final class StepRecipe {

    /** What a step runs on: a model, its data and how the ranks agree. Every rank calls these in the same order. */
    public interface Parts {

        /** Zeroes the gradients before the step's first micro-batch. */
        void zeroGrad();

        /**
         * Reads the next micro-batch, runs forward and backward with the loss's gradient seeded with
         * {@code dlossScale}, accumulating into the gradients; returns its mean loss. {@code last}: the step's last
         * micro-batch.
         */
        double microBatch(float dlossScale, boolean last);

        /** A step failed during its micro-batches: no transfer may still read the gradients. */
        default void abandon(Throwable failure) {
        }

        /** After the backward: the gradients become their mean over the ranks (whole, or this rank's shard). */
        void reduce();

        /** {@code loss} averaged over the ranks (one rank: as it is). */
        double meanLoss(double loss);

        /** Whether any rank's gradients hold inf or NaN. */
        boolean anyNonFinite();

        /** The sum of squares of the whole (averaged) gradient, over the ranks. */
        double sumOfSquares();

        /** The optimizer's step {@code t} (≥ 1) at rate {@code lr}, gradients multiplied by {@code gradScale}. */
        void update(int t, float lr, float gradScale);

        /** Each of {@code amaxes} replaced by its maximum over the ranks. */
        float[] maxOverRanks(float[] amaxes);

        /** The model's FP8 scaling state, or null. */
        Fp8State fp8();
    }

    private final LossScaler scaler;
    private final LrSchedule schedule;
    private final float gradClip;
    private final int B;
    private final int T;
    private final int K;
    private final int ranks;

    /**
     * Steps of {@code K} micro-batches of {@code B × T} per rank over {@code ranks} ranks, the gradient norm clipped
     * to {@code gradClip} (0: off).
     */
    public StepRecipe(LossScaler scaler, LrSchedule schedule, float gradClip, int B, int T, int K, int ranks) {
        this.scaler = scaler;
        this.schedule = schedule;
        this.gradClip = gradClip;
        this.B = B;
        this.T = T;
        this.K = K;
        this.ranks = ranks;
    }

    /**
     * Zeroes the gradients and accumulates the next K micro-batches' into them, the loss times {@code lossScale};
     * returns their mean loss. This rank's own gradients and loss only.
     */
    public double accumulate(Parts parts, float lossScale) {
        float dlossScale = 1f / ((float) B * T * K) * lossScale;
        parts.zeroGrad();
        double loss = 0;
        for (int k = 0; k < K; k++) {
            loss += parts.microBatch(dlossScale, k == K - 1);
        }
        return loss / K;
    }

    /**
     * Optimizer step {@code s} (0-based) on {@code parts}; {@code valLoss} goes into the metrics as it is.
     *
     * <p>With fp16 loss scaling the gradients are those of the loss times the scale; when they hold inf or NaN on any
     * rank the step makes no update, the scale halves, and the step still counts. Otherwise the norm and the update see
     * the gradients divided by the scale. The optimizer's step number is the number of updates made,
     * {@code s − skipped + 1}.
     *
     * @throws IllegalStateException when the loss or the gradient norm is not finite (the run diverged), or fp16
     *                               gradients overflow at the smallest loss scale
     */
    public StepMetrics step(int s, double valLoss, Parts parts) {
        long t0 = System.nanoTime();
        float lossScale = scaler.scale();
        double loss;
        try {
            loss = accumulate(parts, lossScale);
        } catch (RuntimeException | Error e) {
            parts.abandon(e);
            throw e;
        }
        parts.reduce();
        loss = parts.meanLoss(loss);
        boolean overflow = scaler.enabled() && parts.anyNonFinite();
        double norm = overflow ? Double.NaN : Math.sqrt(parts.sumOfSquares()) / lossScale;
        if (!Double.isFinite(loss) || !overflow && !Double.isFinite(norm)) {
            throw new IllegalStateException("training diverged at step " + s + " (loss " + loss + ", gradient norm "
                    + norm + "): lower the learning rate or clip the gradients");
        }
        float lr = schedule.lr(s);
        if (!overflow) {
            float clip = gradClip > 0 && norm > gradClip ? (float) (gradClip / norm) : 1f;
            parts.update(s + 1 - scaler.skippedSteps(), lr, clip / lossScale); // the scale is a power of 2: exact
        }
        scaler.afterStep(overflow);
        Fp8State fp8 = parts.fp8();
        if (fp8 != null) { // every rank casts with the same scales: this step's amaxes are the ranks' maximum
            if (ranks > 1) {
                fp8.recordStepAmaxes(parts.maxOverRanks(fp8.stepAmaxes()));
            }
            fp8.update();
        }
        double ms = (System.nanoTime() - t0) / 1e6;
        double perS = (double) B * T * K * ranks / (ms / 1e3);
        return scaler.enabled()
                ? new StepMetrics(s, loss, valLoss, ms, perS, lr, norm, lossScale, overflow, scaler.skippedSteps())
                : new StepMetrics(s, loss, valLoss, ms, perS, lr, norm);
    }
}
