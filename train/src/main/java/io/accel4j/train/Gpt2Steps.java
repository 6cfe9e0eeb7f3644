package io.accel4j.train;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.fit.StepRecipe;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.parallel.ModelStates;
import java.lang.foreign.MemorySegment;
import java.util.function.IntConsumer;

/**
 * The CLI trainer's {@link StepRecipe.Parts}: a {@link Gpt2} reading its micro-batches from a {@link DataLoader}
 * into host buffers, its model states ({@link ModelStates}: stage 0 or ZeRO) reducing and updating with AdamW.
 * {@code overlap}: the last micro-batch's backward callback that starts the gradient buckets (null: none).
 */
record Gpt2Steps(Gpt2 model, TrainConfig cfg, ModelStates states, DataLoader train, MemorySegment inputs,
                 MemorySegment targets, IntConsumer overlap) implements StepRecipe.Parts {

    @Override
    public void zeroGrad() {
        model.zeroGrad();
    }

    @Override
    public double microBatch(float dlossScale, boolean last) {
        train.next(inputs, targets);
        return model.forwardBackward(inputs, targets, cfg.batch(), cfg.seq(), dlossScale, last ? overlap : null);
    }

    @Override
    public void abandon(Throwable failure) {
        states.abandon(failure); // no all-reduce may still read the gradients once the caller closes the model
    }

    @Override
    public void reduce() {
        states.reduceGradients();
    }

    @Override
    public double meanLoss(double loss) {
        return states.meanLoss(loss);
    }

    @Override
    public boolean anyNonFinite() {
        return states.anyNonFinite();
    }

    @Override
    public double sumOfSquares() {
        return states.sumOfSquares();
    }

    @Override
    public void update(int t, float lr, float gradScale) {
        states.update(new AdamWConfig(lr, cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay()), t, gradScale);
    }

    /** Through the model's memory: host buffers, or device buffers for NCCL. */
    @Override
    public float[] maxOverRanks(float[] amaxes) {
        return states.maxOverRanks(amaxes);
    }

    /**
     * The model's FP8 state: the recipe flushes the amaxes the backend deferred into the histories (one device→host
     * copy on the GPU), takes their maximum over the ranks (as Transformer Engine reduces amaxes over the
     * data-parallel group), then every history computes the next step's scale.
     */
    @Override
    public Fp8State fp8() {
        return model.fp8();
    }
}
