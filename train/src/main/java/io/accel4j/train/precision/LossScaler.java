package io.accel4j.train.precision;

import io.accel4j.core.ops.Ops;
import io.accel4j.train.parallel.ValueExchange;
import java.lang.foreign.MemorySegment;

/**
 * Dynamic loss scaling for fp16 training: the loss (in practice its gradient seed, {@code dlossScale}) is multiplied
 * by {@link #scale()} so that small gradients survive fp16's range (they flush to zero below 2^-24), and the
 * gradients are divided by it again before the update (folded into AdamW's gradient scale and the clip norm; the
 * scale is a power of two, so both are exact). When a step's gradients hold inf or NaN — some fp16 operand
 * overflowed past 65504 — the step is skipped (no update) and the scale halves ({@link #BACKOFF}); after
 * {@code window} clean steps in a row it doubles ({@link #GROWTH}), up to {@link #MAX_SCALE}.
 *
 * <p>A scaler for fp32 or bf16 is {@linkplain #enabled() disabled}: scale 1, never skips. Either way it counts the
 * skipped steps of the run ({@link #skippedSteps}), which AdamW's step number leaves out. Its state ({@link #scale},
 * {@link #cleanSteps}, {@link #skippedSteps}) goes into checkpoints, so a resumed run scales exactly as an
 * uninterrupted one.
 */
public final class LossScaler {

    /** The factor an overflow multiplies the scale by. */
    public static final float BACKOFF = 0.5f;
    /** The factor {@code window} clean steps multiply the scale by. */
    public static final float GROWTH = 2f;
    /**
     * The smallest scale: 1. An overflow at scale 1 is the gradients' own (the unscaled values pass 65504), which no
     * loss scale can help: the run has diverged.
     */
    public static final float MIN_SCALE = 1f;
    /** The largest scale, 2^64: growth stops there (the gradients of a trained model are never that small). */
    public static final float MAX_SCALE = 0x1p64f;

    private final boolean enabled;
    private final int window;
    private float scale;
    private int cleanSteps;
    private int skippedSteps;

    /** The scaler of a run of {@code precision}: dynamic for fp16, disabled otherwise. */
    public LossScaler(Precision precision) {
        this.enabled = precision.scalesLoss();
        this.window = precision.lossScaleWindow();
        this.scale = enabled ? precision.initialLossScale() : 1f;
    }

    /** Whether the loss is scaled and the gradients checked (fp16). */
    public boolean enabled() {
        return enabled;
    }

    /** The current loss scale (1 when disabled). */
    public float scale() {
        return scale;
    }

    /** Clean steps since the last overflow or growth. */
    public int cleanSteps() {
        return cleanSteps;
    }

    /** Steps skipped so far in the run (resumed runs included). */
    public int skippedSteps() {
        return skippedSteps;
    }

    /**
     * Records the outcome of a step at the current scale: an overflow halves the scale and counts a skipped step, a
     * clean step counts towards growth (disabled: nothing changes).
     *
     * @throws IllegalStateException on an overflow at {@link #MIN_SCALE}: the gradients overflow unscaled
     */
    public void afterStep(boolean overflow) {
        if (!enabled) {
            return;
        }
        if (overflow) {
            if (scale <= MIN_SCALE) {
                throw new IllegalStateException("fp16 gradients overflow even at loss scale " + scale
                        + " (the minimum): the run diverged; lower the learning rate, clip the gradients or train "
                        + "with --precision bf16");
            }
            scale *= BACKOFF;
            cleanSteps = 0;
            skippedSteps++;
        } else if (++cleanSteps >= window) {
            scale = Math.min(scale * GROWTH, MAX_SCALE);
            cleanSteps = 0;
        }
    }

    /**
     * Sets the state saved by a checkpoint. {@code scale} 0 means the checkpoint has none (an fp32/bf16 run, or an
     * older file): the scale stays where it is; the skipped-step count is taken in any case.
     *
     * @throws IllegalArgumentException for a scale that is not 0 or a power of two in [MIN_SCALE, MAX_SCALE], or
     *                                  negative counts
     */
    public void restore(float scale, int cleanSteps, int skippedSteps) {
        if (scale != 0 && !(scale >= MIN_SCALE && scale <= MAX_SCALE
                && scale == Math.scalb(1f, Math.getExponent(scale)))) {
            throw new IllegalArgumentException("loss scale " + scale + " is not a power of two in [1, 2^64]");
        }
        if (cleanSteps < 0 || skippedSteps < 0) {
            throw new IllegalArgumentException("clean steps " + cleanSteps + " and skipped steps " + skippedSteps
                    + " must be >= 0");
        }
        this.skippedSteps = skippedSteps;
        if (enabled && scale != 0) {
            this.scale = scale;
            this.cleanSteps = Math.min(cleanSteps, window - 1);
        }
    }

    /**
     * Whether the {@code count} fp32 gradients hold inf or NaN on any rank. With an exchange (several ranks) every
     * rank gets the same answer: the flags meet in a MAX all-reduce (with gradients all-reduced first they agree
     * anyway; with sharded gradients each rank sees only its shard); null: this rank's answer.
     */
    public static boolean overflowed(Ops ops, MemorySegment grads, long count, ValueExchange ranks) {
        boolean local = ops.hasNonFinite(grads, count);
        return ranks == null ? local : ranks.any(local);
    }
}
