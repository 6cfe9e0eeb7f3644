package io.accel4j.train.model;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import java.util.Objects;

/**
 * How a {@link Gpt2} is made, fixed for its life: which activations backward recomputes, the matmuls' precision, and
 * how activations, gradients and working weights are stored. {@link #DEFAULT} is llm.c's: fp32 throughout, every
 * activation kept; each {@code with…} returns a copy with one choice changed.
 *
 * @param recompute   which activations backward recomputes ({@link Recompute})
 * @param operands    the matmuls' operands: FP32, BF16 or FP16 (see {@link io.accel4j.core.ops.MatmulOps}); under
 *                    FP8 the LM head's
 * @param fp8         null, or the delayed-scaling recipe under which the blocks' linear layers take FP8 operands
 * @param activations how the activations the blocks save for backward are stored: FP32, or BF16/FP16
 *                    ({@link io.accel4j.nn.NetworkSpec#activationStorage})
 * @param gradients   how the gradients are stored: FP32 ({@link FlatWeights}), or BF16/FP16 ({@link HalfWeights}: the
 *                    blocks' and the final LayerNorm's in 16 bits, one layer's fp32 working region;
 *                    {@link Gpt2#grads()} is then not available, the trainer reads them through
 *                    {@link Gpt2#halfGradients()})
 * @param parameters  how the working weights are stored: FP32, or BF16 ({@link Bf16ParamWeights}, {@code
 *                    --bf16-params}: the blocks' and the final LayerNorm's in a bf16 store widened one layer at a time
 *                    into an fp32 working region, the embeddings as an fp32 copy of bf16 values; {@link Gpt2#params()}
 *                    is then not available: the fp32 master weights are the optimizer's, the parameters are set
 *                    through {@link Gpt2#copyParamsFromHost} (rounded to nearest even) or
 *                    {@link Gpt2#halfParameters()})
 */
public record Gpt2Options(Recompute recompute, DType operands, DelayedScaling fp8, DType activations, DType gradients,
                          DType parameters) {

    /** fp32 operands, activations, gradients and weights; every activation kept; no FP8. */
    public static final Gpt2Options DEFAULT = new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP32, DType.FP32,
            DType.FP32);

    /**
     * Checks what can be checked without a backend (the activation and gradient types are checked by the blocks and
     * weights that take them).
     *
     * @throws NullPointerException     for a null choice other than {@code fp8}
     * @throws IllegalArgumentException for working weights neither FP32 nor BF16
     */
    public Gpt2Options {
        Objects.requireNonNull(recompute, "recompute");
        Objects.requireNonNull(operands, "operands");
        Objects.requireNonNull(activations, "storage");
        Objects.requireNonNull(gradients, "gradients");
        Objects.requireNonNull(parameters, "parameters");
        if (parameters != DType.FP32 && parameters != DType.BF16) {
            throw new IllegalArgumentException("the working weights are stored in fp32 or bf16, got " + parameters);
        }
    }

    /** A copy keeping the activations {@code recompute} says. */
    public Gpt2Options withRecompute(Recompute recompute) {
        return new Gpt2Options(recompute, operands, fp8, activations, gradients, parameters);
    }

    /** A copy whose matmuls take {@code operands} and, with {@code fp8} not null, whose blocks' linear layers FP8. */
    public Gpt2Options withPrecision(DType operands, DelayedScaling fp8) {
        return new Gpt2Options(recompute, operands, fp8, activations, gradients, parameters);
    }

    /** A copy storing the activations saved for backward in {@code activations}. */
    public Gpt2Options withActivationStorage(DType activations) {
        return new Gpt2Options(recompute, operands, fp8, activations, gradients, parameters);
    }

    /** A copy storing the gradients in {@code gradients}. */
    public Gpt2Options withGradientStorage(DType gradients) {
        return new Gpt2Options(recompute, operands, fp8, activations, gradients, parameters);
    }

    /** A copy storing the working weights in {@code parameters}. */
    public Gpt2Options withParameterStorage(DType parameters) {
        return new Gpt2Options(recompute, operands, fp8, activations, gradients, parameters);
    }
}
