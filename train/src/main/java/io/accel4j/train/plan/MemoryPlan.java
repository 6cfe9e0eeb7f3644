package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.HalfWeights;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ShardedWeights;
import io.accel4j.train.parallel.UnitShards;
import io.accel4j.train.parallel.ZeroMemory;
import java.util.Locale;

/**
 * The bytes one rank of a training run allocates off-heap, by kind, computed from the shapes alone — exactly what
 * {@link Gpt2#totalBytes()} plus the optimizer's moments (or their shard) and the batch buffers come to once allocated — and the largest micro-batch
 * that fits a budget. Not counted: the JVM heap (the data loaders' two (B·T+1)-token batches each, the kernels'
 * per-thread scratch) and the token files, which are memory-mapped.
 *
 * <p>With ZeRO the model states are the ZeRO paper's ({@link ZeroMemory}) up to the shards' rounding, plus ZeRO-2/3's
 * working buffers: from stage 2 the shards are cut unit by unit ({@link UnitShards}), so the largest rank's shard is
 * {@code Σ_u ⌈|u|/N⌉ ≤ ⌈Ψ/N⌉ + L + 1} elements; the working buffers hold one unit of embeddings (wte and wpe), two
 * layers and the final LayerNorm ({@link UnitShards#workingElements}, W): at stage 2 for the gradients only, plus a
 * scratch of the largest unit's chunk for accumulated micro-batches; at stage 3 for the gradients and as many for the
 * gathered parameters. So per rank, fp32:
 * <pre>
 *  stage 0   4Ψ   + 4Ψ   + 8Ψ
 *  stage 1   4Ψ   + 4Ψ   + 8Ψ/N
 *  stage 2   4Ψ   + 4Ψ/N + 8Ψ/N  + 4W + 4⌈|wte,wpe|/N⌉
 *  stage 3   4Ψ/N + 4Ψ/N + 8Ψ/N  + 8W
 * </pre>
 *
 * @param parameters  fp32 parameters, 4Ψ (this rank's shard at ZeRO stage 3)
 * @param gradients   fp32 gradients, 4Ψ (this rank's shard of the average from ZeRO stage 2), or 16-bit ones
 *                    ({@link HalfWeights#gradientBytes})
 * @param optimizer   AdamW's fp32 first and second moments, 8Ψ (8Ψ/N from ZeRO stage 1)
 * @param working     ZeRO-2/3's working buffers for the units in use (gathered parameters, gradients before their
 *                    reduce-scatter); 0 below stage 2
 * @param activations the activations and their gradients for B·T positions, with the model's token buffers
 *                    ({@link Gpt2#activationBytes(GptConfig, int, int, Recompute)})
 * @param batch       the trainer's input and target token buffers and its one-float scratch
 */
public record MemoryPlan(long parameters, long gradients, long optimizer, long working, long activations,
                         long batch) {

    /** The plan of a rank training {@code config} on micro-batches of {@code B × T} keeping {@code recompute}'s. */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute) {
        return of(config, B, T, recompute, 0, 1);
    }

    /**
     * {@link #of(GptConfig, int, int, Recompute)} for one of {@code ranks} ranks sharding with ZeRO stage
     * {@code zeroStage} (see above). With ZeRO the figure is the largest rank's, less its N fp64 norm partials.
     */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute, int zeroStage, int ranks) {
        return of(config, B, T, recompute, zeroStage, ranks, DType.FP32);
    }

    /**
     * {@link #of(GptConfig, int, int, Recompute, int, int)} with the activations the blocks save for backward stored
     * in {@code storage} (FP32, or BF16/FP16: a 16-bit store per block plus one block's fp32 working set,
     * {@link Gpt2#activationBytes(GptConfig, int, int, Recompute, DType)}).
     */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute, int zeroStage, int ranks,
                                DType storage) {
        return of(config, B, T, recompute, zeroStage, ranks, storage, DType.FP32);
    }

    /**
     * {@link #of(GptConfig, int, int, Recompute, int, int, DType)} with the gradients stored in {@code gradients}:
     * FP32, or BF16/FP16 at stages 0 and 1 ({@link HalfWeights#gradientBytes}: 2 bytes a parameter of the blocks
     * and the final LayerNorm, 4 of the embeddings, one layer's fp32 working region and the consumers' chunk; whole on
     * every rank, as ZeRO-1's fp32 gradients are; the moments 8Ψ/N at stage 1).
     *
     * @throws IllegalArgumentException for 16-bit gradients with ZeRO stage 2 or 3
     */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute, int zeroStage, int ranks,
                                DType storage, DType gradients) {
        if (gradients != DType.FP32 && zeroStage > 1) {
            throw new IllegalArgumentException("16-bit gradients do not go with ZeRO stage " + zeroStage + " yet");
        }
        ParameterLayout layout = new ParameterLayout(config);
        long psi = layout.count();
        long shard = zeroStage >= 2 ? UnitShards.largestShard(layout, ranks)
                : zeroStage == 1 ? ZeroMemory.fp32(1, ranks, psi).shard() : psi;
        long w = UnitShards.workingElements(layout);
        long working = switch (zeroStage) {
            case 2 -> 4 * (w + ShardedWeights.scratchElements(layout, ranks));
            case 3 -> 2 * 4 * w;
            default -> 0;
        };
        long tokens = Math.multiplyExact((long) B * T, (long) Integer.BYTES);
        long grads = gradients != DType.FP32 ? HalfWeights.gradientBytes(config) : 4 * (zeroStage >= 2 ? shard : psi);
        return new MemoryPlan(4 * (zeroStage >= 3 ? shard : psi), grads, 8 * shard,
                working, Gpt2.activationBytes(config, B, T, recompute, storage), 2 * tokens + Float.BYTES);
    }

    /** The model states without the working buffers: parameters, gradients, AdamW's moments. */
    public long modelStates() {
        return parameters + gradients + optimizer;
    }

    /** The bytes in all. */
    public long total() {
        return parameters + gradients + optimizer + working + activations + batch;
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
        return largestBatch(config, T, recompute, zeroStage, ranks, DType.FP32, budget, maxBatch);
    }

    /** {@link #largestBatch(GptConfig, int, Recompute, int, int, long, int)} with activations stored in {@code storage}. */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, int zeroStage, int ranks,
                                   DType storage, long budget, int maxBatch) {
        return largestBatch(config, T, recompute, zeroStage, ranks, storage, DType.FP32, budget, maxBatch);
    }

    /** {@link #largestBatch(GptConfig, int, Recompute, int, int, DType, long, int)} with gradients in {@code gradients}. */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, int zeroStage, int ranks,
                                   DType storage, DType gradients, long budget, int maxBatch) {
        if (maxBatch < 1) {
            throw new IllegalArgumentException("maxBatch must be >= 1, got " + maxBatch);
        }
        int lo = 0, hi = maxBatch; // fits(lo) holds (vacuously for 0); find the largest
        while (lo < hi) {
            int mid = (int) (((long) lo + hi + 1) >>> 1);
            if (fits(() -> of(config, mid, T, recompute, zeroStage, ranks, storage, gradients), budget)) {
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
                        + "(AdamW m, v)%s%nactivations %9.1f MiB%nbatch      %10.1f MiB%ntotal      %10.1f MiB",
                mib(parameters), mib(gradients), mib(optimizer), working == 0 ? ""
                        : String.format(Locale.ROOT, "%nworking    %10.1f MiB (ZeRO's units in use)", mib(working)),
                mib(activations), mib(batch), mib(total()));
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }
}
