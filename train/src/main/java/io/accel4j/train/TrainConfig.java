package io.accel4j.train;

import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.parallel.ZeroMemory;
import io.accel4j.train.precision.Precision;

/**
 * What a training run does, besides the model and the data: batch shape, steps, optimizer, schedule, clipping,
 * accumulation, validation and checkpoint cadence. Build one with {@link #builder()}; the defaults are llm.c's
 * ({@code train_gpt2.c}): AdamW (0.9, 0.999, 1e-8), weight decay 0 applied to every parameter, constant learning
 * rate, no clipping.
 *
 * @param batch          B, sequences per micro-batch
 * @param seq            T, tokens per sequence
 * @param steps          optimizer steps of the whole run
 * @param gradAccum      K, micro-batches per step: a step sees K·B sequences, each micro-batch's gradient scaled
 *                       by 1/(B·T·K)
 * @param lr             the peak learning rate
 * @param schedule       how the learning rate moves, see {@link #learningRate}
 * @param warmup         steps of linear warmup from lr/warmup to lr (0: none)
 * @param minLrFraction  the cosine schedule's floor as a fraction of lr, in [0, 1]
 * @param beta1          AdamW's β1
 * @param beta2          AdamW's β2
 * @param eps            AdamW's ε
 * @param weightDecay    AdamW's decoupled weight decay
 * @param decayMatricesOnly whether weight decay spares the no-decay set (biases and LayerNorm parameters): then only
 *                       the 2-D matrices (wte, wpe, qkvw, attprojw, fcw, fcprojw) decay, as in llm.c's
 *                       {@code train_gpt2.cu}; otherwise every parameter does, as in {@code train_gpt2.c}
 * @param gradClip       clip the global gradient norm to this (0: no clipping)
 * @param valEvery       validate before every step that is a multiple of this (0: only when asked)
 * @param valBatches     validation batches (B·T each), always the first ones of the val file (0: no validation)
 * @param saveEvery      checkpoint after every step that is a multiple of this (0: only when asked)
 * @param dataOrder      the train batches' order
 * @param seed           the shuffle's seed (and the initialisation's, for a model from scratch)
 * @param bucketBytes    data parallelism: gradients are averaged in buckets of at least this many bytes, each
 *                       started as soon as backward has produced it (0: one all-reduce of all the gradients after
 *                       backward); default 25 MiB, PyTorch DDP's
 * @param zeroStage      data parallelism: the ZeRO stage ({@code LearnerBuilder.zero}): 0 plain DDP (every rank holds
 *                       everything), 1 AdamW's moments sharded over the ranks, 2 the averaged gradients too, 3 the
 *                       parameters too; above 0 the run needs more than one rank
 * @param precision      the matmuls' operand precision and fp16's loss scaling ({@link Precision}); default fp32
 */
public record TrainConfig(int batch, int seq, int steps, int gradAccum, float lr, Schedule schedule, int warmup,
                          float minLrFraction, float beta1, float beta2, float eps, float weightDecay,
                          boolean decayMatricesOnly, float gradClip, int valEvery, int valBatches, int saveEvery,
                          SampleOrder.Mode dataOrder, long seed, long bucketBytes, int zeroStage,
                          Precision precision) {

    /** The default {@link #bucketBytes}: 25 MiB. */
    public static final long DEFAULT_BUCKET_BYTES = 25L << 20;

    /** Learning-rate schedules. */
    public enum Schedule {
        /** lr after the warmup. */
        CONSTANT,
        /** After the warmup, a half cosine from lr down to {@code minLrFraction·lr} at the last step. */
        COSINE
    }

    public TrainConfig {
        positive("batch", batch);
        positive("seq", seq);
        positive("steps", steps);
        positive("gradAccum", gradAccum);
        nonNegative("warmup", warmup);
        nonNegative("valEvery", valEvery);
        nonNegative("valBatches", valBatches);
        nonNegative("saveEvery", saveEvery);
        if (bucketBytes < 0) {
            throw new IllegalArgumentException("bucketBytes must be >= 0 (0: one all-reduce), got " + bucketBytes);
        }
        if (zeroStage < 0 || zeroStage > ZeroMemory.MAX_STAGE) {
            throw new IllegalArgumentException("zeroStage must be 0 (plain data parallelism), 1, 2 or 3, got "
                    + zeroStage);
        }
        if (!(lr > 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("lr must be finite and > 0, got " + lr);
        }
        if (!(minLrFraction >= 0 && minLrFraction <= 1)) {
            throw new IllegalArgumentException("minLrFraction must be in [0, 1], got " + minLrFraction);
        }
        if (!(gradClip >= 0) || !Float.isFinite(gradClip)) {
            throw new IllegalArgumentException("gradClip must be finite and >= 0 (0: off), got " + gradClip);
        }
        if (valEvery > 0 && valBatches < 1) {
            throw new IllegalArgumentException("valBatches must be >= 1 when validating (valEvery " + valEvery + ")");
        }
        if (schedule == null || dataOrder == null || precision == null) {
            throw new IllegalArgumentException("schedule, dataOrder and precision must be given");
        }
        new io.accel4j.core.ops.AdamWConfig(lr, beta1, beta2, eps, weightDecay); // checks the optimizer's ranges
    }

    private static void positive(String name, int v) {
        if (v < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + v);
        }
    }

    private static void nonNegative(String name, int v) {
        if (v < 0) {
            throw new IllegalArgumentException(name + " must be >= 0, got " + v);
        }
    }

    /**
     * The run's AdamW (betas, epsilon, weight decay; with {@link #decayMatricesOnly} and a decay, the no-decay set
     * spared), as the CLI trains with it.
     */
    public io.accel4j.optim.OptimizerSpec adamw() {
        boolean decayAll = !decayMatricesOnly || weightDecay == 0;
        return new io.accel4j.optim.AdamW.Spec(beta1, beta2, eps, weightDecay, decayAll);
    }

    /**
     * The learning rate of step {@code step} (0-based): {@code lr·(step+1)/warmup} during the warmup; then lr
     * (constant), or {@code min + (lr − min)·½(1 + cos(π·(step − warmup)/(steps − warmup)))} with
     * {@code min = minLrFraction·lr} (cosine; llm.c's schedule).
     */
    public float learningRate(int step) {
        if (step < warmup) {
            return lr * (step + 1) / warmup;
        }
        if (schedule == Schedule.CONSTANT || steps <= warmup) {
            return lr;
        }
        double ratio = (double) (step - warmup) / (steps - warmup);
        double min = (double) minLrFraction * lr;
        return (float) (min + (lr - min) * 0.5 * (1 + Math.cos(Math.PI * ratio)));
    }

    /** Tokens one optimizer step trains on, B·T·K. */
    public long tokensPerStep() {
        return (long) batch * seq * gradAccum;
    }

    /** A builder with the defaults: B 4, T 64, 10 steps, lr 3e-4, the rest as llm.c. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder starting from this config. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.batch = batch; b.seq = seq; b.steps = steps; b.gradAccum = gradAccum; b.lr = lr; b.schedule = schedule;
        b.warmup = warmup; b.minLrFraction = minLrFraction; b.beta1 = beta1; b.beta2 = beta2; b.eps = eps;
        b.weightDecay = weightDecay; b.decayMatricesOnly = decayMatricesOnly; b.gradClip = gradClip;
        b.valEvery = valEvery; b.valBatches = valBatches; b.saveEvery = saveEvery; b.dataOrder = dataOrder;
        b.seed = seed;
        b.bucketBytes = bucketBytes;
        b.zeroStage = zeroStage;
        b.precision = precision;
        return b;
    }

    /** Fluent construction; {@link #build} checks everything. */
    public static final class Builder {
        private int batch = 4, seq = 64, steps = 10, gradAccum = 1, warmup, valEvery, valBatches = 1, saveEvery;
        private float lr = 3e-4f, minLrFraction = 0f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay;
        private float gradClip;
        private boolean decayMatricesOnly;
        private Schedule schedule = Schedule.CONSTANT;
        private SampleOrder.Mode dataOrder = SampleOrder.Mode.SHUFFLED;
        private long seed = 42;
        private long bucketBytes = DEFAULT_BUCKET_BYTES;
        private int zeroStage;
        private Precision precision = Precision.FP32;

        private Builder() {}

        public Builder batch(int v) { batch = v; return this; }
        public Builder seq(int v) { seq = v; return this; }
        public Builder steps(int v) { steps = v; return this; }
        public Builder gradAccum(int v) { gradAccum = v; return this; }
        public Builder lr(float v) { lr = v; return this; }
        public Builder schedule(Schedule v) { schedule = v; return this; }
        public Builder warmup(int v) { warmup = v; return this; }
        public Builder minLrFraction(float v) { minLrFraction = v; return this; }
        public Builder betas(float b1, float b2) { beta1 = b1; beta2 = b2; return this; }
        public Builder eps(float v) { eps = v; return this; }
        public Builder weightDecay(float v) { weightDecay = v; return this; }
        public Builder decayMatricesOnly(boolean v) { decayMatricesOnly = v; return this; }
        public Builder gradClip(float v) { gradClip = v; return this; }
        public Builder valEvery(int v) { valEvery = v; return this; }
        public Builder valBatches(int v) { valBatches = v; return this; }
        public Builder saveEvery(int v) { saveEvery = v; return this; }
        public Builder dataOrder(SampleOrder.Mode v) { dataOrder = v; return this; }
        public Builder seed(long v) { seed = v; return this; }
        public Builder bucketBytes(long v) { bucketBytes = v; return this; }
        public Builder zeroStage(int v) { zeroStage = v; return this; }
        public Builder precision(Precision v) { precision = v; return this; }

        public TrainConfig build() {
            return new TrainConfig(batch, seq, steps, gradAccum, lr, schedule, warmup, minLrFraction, beta1, beta2,
                    eps, weightDecay, decayMatricesOnly, gradClip, valEvery, valBatches, saveEvery, dataOrder, seed,
                    bucketBytes, zeroStage, precision);
        }
    }
}
