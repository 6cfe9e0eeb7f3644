package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.optim.Bf16AdamW;
import io.accel4j.optim.Bf16StoreAdamW;
import io.accel4j.train.model.Bf16ParamWeights;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.HalfWeights;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.Arena;

/**
 * The {@link MemoryPlan} of a rank whose working weights are stored in bf16 ({@code --bf16-params}, stage 0: one rank
 * or DDP): the parameters are {@link Bf16ParamWeights#parameterBytes} (2 bytes a parameter of the blocks and the final
 * LayerNorm, 4 of the embeddings, one layer's fp32 working region, a bf16 scratch), the gradients fp32 (4Ψ) or 16-bit
 * ({@link HalfWeights#gradientBytes}), the optimizer the fp32 master weights and AdamW's moments (12Ψ); activations
 * and the batch buffers as every plan. So per parameter about 2 + 4 + 12 = 18 bytes with fp32 gradients, 16 with
 * 16-bit ones, against fp32 storage's 16 (4 + 4 + 8) — the bytes move from the parameters to the master: on one rank
 * bf16 working weights save device memory only where something else leaves the device (the optimizer's state,
 * offloaded) or is sharded. What {@link #largestBatch}, {@code --find-batch-size} and {@code plan} read.
 */
public final class Bf16ParamsPlan {

    private Bf16ParamsPlan() {
    }

    /** The plan of one rank training {@code config} on {@code B × T} micro-batches with bf16 working weights. */
    public static MemoryPlan of(GptConfig config, int B, int T, Recompute recompute, DType storage, DType gradients) {
        long psi = new ParameterLayout(config).count();
        long tokens = Math.multiplyExact((long) B * T, (long) Integer.BYTES);
        long grads = gradients != DType.FP32 ? HalfWeights.gradientBytes(config) : 4 * psi;
        return new MemoryPlan(Bf16ParamWeights.parameterBytes(config), grads, 12 * psi, 0,
                Gpt2.activationBytes(config, B, T, recompute, storage), 2 * tokens + Float.BYTES);
    }

    /**
     * The plan of one rank with bf16 working weights and the optimizer offloaded ({@code --bf16-params
     * --offload-optimizer}, {@link io.accel4j.optim.OffloadedBf16AdamW}): the device keeps {@link #of}'s parameters,
     * gradients, activations and batch, no optimizer state; the host the fp32 master (4Ψ), AdamW's m and v (8Ψ) and
     * the transfer chunks ({@link OffloadPlan#gradients()} here: 4 + 2 bytes × min(64 Ki, Ψ), not a whole gradient
     * copy).
     */
    public static OffloadPlan offloaded(GptConfig config, int B, int T, Recompute recompute, DType storage,
                                        DType gradients) {
        MemoryPlan whole = of(config, B, T, recompute, storage, gradients);
        long psi = new ParameterLayout(config).count();
        MemoryPlan device = new MemoryPlan(whole.parameters(), whole.gradients(), 0, 0, whole.activations(),
                whole.batch());
        return new OffloadPlan(device, 4 * psi, io.accel4j.optim.OffloadedBf16AdamW.hostBytes(psi) - 12 * psi,
                8 * psi);
    }

    /** The largest B ≤ {@code maxBatch} whose plan fits {@code budget} bytes; 0 when not even B = 1 fits. */
    public static int largestBatch(GptConfig config, int T, Recompute recompute, DType storage, DType gradients,
                                   long budget, int maxBatch) {
        if (maxBatch < 1) {
            throw new IllegalArgumentException("maxBatch must be >= 1, got " + maxBatch);
        }
        int lo = 0, hi = maxBatch;
        while (lo < hi) {
            int mid = (int) (((long) lo + hi + 1) >>> 1);
            boolean fits;
            try {
                fits = of(config, mid, T, recompute, storage, gradients).total() <= budget;
            } catch (ArithmeticException e) {
                fits = false;
            }
            if (fits) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return lo;
    }

    /**
     * {@link BatchSizeFinder#choose}'s choice with this plan: B the largest batch that fits {@code budget}; with a
     * {@code globalBatch} the fewest micro-batches that split it exactly over the ranks.
     *
     * @throws IllegalArgumentException when not even one sequence fits, or the global batch does not split
     */
    public static BatchSizeFinder.Choice choose(GptConfig config, int T, Recompute recompute, DType storage,
                                                DType gradients, long budget, int ranks, Integer globalBatch,
                                                int gradAccum) {
        int largest = largestBatch(config, T, recompute, storage, gradients, budget, BatchSizeFinder.MAX_BATCH);
        if (largest == 0) {
            MemoryPlan one = of(config, 1, T, recompute, storage, gradients);
            throw new IllegalArgumentException("not even one sequence of " + T + " tokens fits the memory budget of "
                    + budget + " bytes: batch 1 needs " + one.total() + " (bf16 parameters, gradients, fp32 master "
                    + "and AdamW state " + one.modelStates() + " of them)");
        }
        if (globalBatch == null) {
            return new BatchSizeFinder.Choice(largest, gradAccum, largest,
                    of(config, largest, T, recompute, storage, gradients));
        }
        if (globalBatch < 1 || globalBatch % ranks != 0) {
            throw new IllegalArgumentException("the global batch must be a positive multiple of the " + ranks
                    + " ranks, got " + globalBatch);
        }
        int perRank = globalBatch / ranks;
        int k = (perRank + largest - 1) / largest;
        while (perRank % k != 0) {
            k++;
        }
        int b = perRank / k;
        return new BatchSizeFinder.Choice(b, k, largest, of(config, b, T, recompute, storage, gradients));
    }

    /**
     * Allocates what {@link #of} counts — the model with its bf16 store, the optimizer's master and moments, the batch
     * buffers — and runs one forward, backward and update on random tokens.
     *
     * @return the bytes allocated, which the caller compares with the plan
     */
    public static long trialStep(GptConfig config, Ops ops, int B, int T, Recompute recompute, DType storage,
                                 DType gradients) {
        DType operands = storage == DType.FP32 ? DType.FP32 : storage;
        try (Gpt2 model = new Gpt2(config, ops, B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                .withPrecision(operands, null).withActivationStorage(storage).withGradientStorage(gradients)
                .withParameterStorage(DType.BF16));
             Arena arena = Arena.ofShared()) {
            model.initialise(1);
            try (Bf16StoreAdamW adamw = new Bf16StoreAdamW(Bf16AdamW.of(0f, 1), ops, model.network().table(),
                    model.halfParameters(), gradients == DType.FP32 ? Bf16StoreAdamW.Gradients.of(model.grads())
                    : Bf16StoreAdamW.Gradients.of(model.halfGradients()))) {
                TrialBatch batch = TrialBatch.random(arena, config, B, T);
                model.zeroGrad();
                model.forwardBackward(batch.inputs(), batch.targets(), B, T, 1f / ((long) B * T));
                adamw.step(1, 1e-4f, 1f);
                return model.totalBytes() + adamw.stateBytes() + batch.bytes();
            }
        }
    }
}
