package io.accel4j.optim;

/**
 * The learning rate of each optimizer step (0-based): {@link #constant}, {@link #warmupCosine} (llm.c's), or
 * {@link #warmupLinear}; {@link #scaled} multiplies any by the linear-scaling rule's factor (Goyal et al.: the peak
 * rate grows with the global batch).
 */
@FunctionalInterface
public interface LrSchedule {

    /** The learning rate of step {@code step} (0-based). */
    float lr(int step);

    /** {@code lr} at every step. */
    static LrSchedule constant(float lr) {
        checkLr(lr);
        return step -> lr;
    }

    /**
     * Linear warmup from {@code lr/warmup} to {@code lr} over {@code warmup} steps, then a cosine from {@code lr} to
     * {@code minFraction·lr} at step {@code steps} — llm.c's schedule, to the bit.
     */
    static LrSchedule warmupCosine(float lr, int warmup, int steps, float minFraction) {
        check(lr, warmup, steps, minFraction);
        return step -> {
            if (step < warmup) {
                return lr * (step + 1) / warmup;
            }
            if (steps <= warmup) {
                return lr;
            }
            double ratio = (double) (step - warmup) / (steps - warmup);
            double min = (double) minFraction * lr;
            return (float) (min + (lr - min) * 0.5 * (1 + Math.cos(Math.PI * ratio)));
        };
    }

    /** Linear warmup as {@link #warmupCosine}, then a straight line from {@code lr} to {@code minFraction·lr}. */
    static LrSchedule warmupLinear(float lr, int warmup, int steps, float minFraction) {
        check(lr, warmup, steps, minFraction);
        return step -> {
            if (step < warmup) {
                return lr * (step + 1) / warmup;
            }
            if (steps <= warmup) {
                return lr;
            }
            double ratio = Math.min(1, (double) (step - warmup) / (steps - warmup));
            double min = (double) minFraction * lr;
            return (float) (lr - (lr - min) * ratio);
        };
    }

    /**
     * This schedule times {@code globalBatch / baseBatch}: a peak rate tuned at {@code baseBatch} examples per step,
     * scaled linearly for a run of {@code globalBatch}.
     */
    default LrSchedule scaled(int baseBatch, int globalBatch) {
        if (baseBatch < 1 || globalBatch < 1) {
            throw new IllegalArgumentException("batch sizes must be >= 1, got base " + baseBatch + ", global "
                    + globalBatch);
        }
        float factor = (float) globalBatch / baseBatch;
        return step -> lr(step) * factor;
    }

    private static void check(float lr, int warmup, int steps, float minFraction) {
        checkLr(lr);
        if (warmup < 0 || steps < 1) {
            throw new IllegalArgumentException("warmup must be >= 0 and steps >= 1, got " + warmup + ", " + steps);
        }
        if (!(minFraction >= 0 && minFraction <= 1)) {
            throw new IllegalArgumentException("minFraction must be in [0, 1], got " + minFraction);
        }
    }

    private static void checkLr(float lr) {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("the learning rate must be finite and >= 0, got " + lr);
        }
    }
}
