package io.accel4j.train;

import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;

/**
 * llm.c's GPT-2 training as a {@link Learner}: the model of {@link Gpt2Blocks} in llm.c's parameter order (its
 * checkpoints' layout), next-token targets over the vocabulary, and the run's batch, accumulation, AdamW, schedule,
 * clipping and precision ({@link TrainConfig}: operands, fp16's loss scaling, FP8, the 16-bit stores). What the
 * caller adds is the run's shape: recomputation, ranks or a communicator, ZeRO and buckets, the backend, threads and
 * the data.
 */
public final class Gpt2Learners {

    private Gpt2Learners() {
    }

    /**
     * The bucket bytes of the all-reduce overlapped with backward over {@code ranks} data-parallel ranks, as
     * {@code accel4j train} takes {@code cfg.bucketBytes()}: for DDP and ZeRO-1 over fp32 gradients; 0 (one
     * all-reduce after backward) for one rank, for ZeRO-2/3 (reduce-scattered unit by unit) and for 16-bit gradients
     * (all-reduced whole, in fp32 chunks).
     */
    public static long bucketBytes(TrainConfig cfg, int ranks) {
        boolean whole = ranks == 1 || cfg.zeroStage() > 1
                || cfg.precision().gradients() != io.accel4j.core.DType.FP32;
        return whole ? 0 : cfg.bucketBytes();
    }

    /** A learner of GPT-2 {@code c} trained as {@code cfg} says. */
    public static LearnerBuilder of(GptConfig c, TrainConfig cfg) {
        Precision p = cfg.precision();
        LearnerBuilder b = Learner.of(() -> Gpt2Blocks.body(c)).tokens(c.V()).classes(c.V())
                .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(cfg.batch(), cfg.seq()).gradAccum(cfg.gradAccum())
                .optimizer(cfg.adamw()).schedule(cfg::learningRate).gradClip(cfg.gradClip())
                .precision(p.operands()).lossScaling(p.initialLossScale(), p.lossScaleWindow())
                .activationStorage(p.activationStorage()).gradientStorage(p.gradients()).seed(cfg.seed());
        return p.fp8() != null ? b.fp8(p.fp8()) : b;
    }
}
