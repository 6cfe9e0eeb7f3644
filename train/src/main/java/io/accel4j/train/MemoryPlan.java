package io.accel4j.train;

import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.util.Locale;

/**
 * The bytes one rank of a training run allocates off-heap, by kind, computed from the shapes alone — exactly what
 * {@link Gpt2#totalBytes()} plus {@link Trainer#stateBytes()} come to once allocated — and the largest micro-batch
 * that fits a budget. Not counted: the JVM heap (the data loaders' two (B·T+1)-token batches each, the kernels'
 * per-thread scratch) and the token files, which are memory-mapped.
 *
 * @param parameters  fp32 parameters, 4Ψ (+ the owned shard at ZeRO stage 3)
 * @param gradients   fp32 gradients, 4Ψ (+ the averaged shard from ZeRO stage 2)
 * @param optimizer   AdamW's fp32 first and second moments, 8Ψ (8Ψ/N from ZeRO stage 1)
 * @param activations the activations and their gradients for B·T positions, with the model's token buffers
 *                    ({@link Gpt2#activationBytes(GptConfig, int, int, Recompute)})
 * @param batch       the trainer's input and target token buffers and its one-float scratch
 */
public record MemoryPlan(long parameters, long gradients, long optimizer, long activations, long batch) {

    /** The plan of a rank training {@code config} on micro-batches of {@code B × T} keeping {@code recompute}'s. */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute) {
        return of(config, B, T, recompute, 0, 1);
    }

    /**
     * {@link #of(GptConfig, int, int, Recompute)} for one of {@code ranks} ranks sharding with ZeRO stage
     * {@code zeroStage} ({@link ZeroMemory#heldByTrainer()}: from stage 1 AdamW's moments cover the largest shard,
     * stage 2 adds a gradient shard, stage 3 a parameter shard, to the model's full buffers). With ZeRO the figure is
     * the largest rank's, less its N fp64 norm partials.
     */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute, int zeroStage, int ranks) {
        ZeroMemory states = ZeroMemory.fp32(zeroStage, ranks, new ParameterLayout(config).count());
        long tokens = Math.multiplyExact((long) B * T, (long) Integer.BYTES);
        return new MemoryPlan(states.heldParamBytes(), states.heldGradBytes(), states.heldOptimizerBytes(),
                Gpt2.activationBytes(config, B, T, recompute), 2 * tokens + Float.BYTES);
    }

    /** The bytes in all. */
    public long total() {
        return parameters + gradients + optimizer + activations + batch;
    }

    /**
     * The largest B whose plan fits {@code budget} bytes with sequences of {@code T} tokens, at most
     * {@code maxBatch}; 0 when not even B = 1 fits. The plan grows with B (only the activations and the batch
     * buffers do), so this is a binary search.
     */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, long budget, int maxBatch) {
        return largestBatch(config, T, recompute, 0, 1, budget, maxBatch);
    }

    /** {@link #largestBatch(GptConfig, int, Recompute, long, int)} for a rank of a ZeRO run. */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, int zeroStage, int ranks,
                                   long budget, int maxBatch) {
        if (maxBatch < 1) {
            throw new IllegalArgumentException("maxBatch must be >= 1, got " + maxBatch);
        }
        int lo = 0, hi = maxBatch; // fits(lo) holds (vacuously for 0); find the largest
        while (lo < hi) {
            int mid = (int) (((long) lo + hi + 1) >>> 1);
            if (fits(() -> of(config, mid, T, recompute, zeroStage, ranks), budget)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return lo;
    }

    private static boolean fits(java.util.function.Supplier<MemoryPlan> plan, long budget) {
        try {
            return plan.get().total() <= budget;
        } catch (ArithmeticException e) { // more positions than a long can count bytes of
            return false;
        }
    }

    /** The plan as a few aligned lines, MiB with one decimal. */
    public String describe() {
        return String.format(Locale.ROOT, "parameters %10.1f MiB%ngradients  %10.1f MiB%noptimizer  %10.1f MiB "
                        + "(AdamW m, v)%nactivations %9.1f MiB%nbatch      %10.1f MiB%ntotal      %10.1f MiB",
                mib(parameters), mib(gradients), mib(optimizer), mib(activations), mib(batch), mib(total()));
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }
}
