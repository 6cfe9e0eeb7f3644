package io.accel4j.train.precision;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.ops.MatmulOps;
import java.util.Locale;
import java.util.Objects;

/**
 * The arithmetic of a training run ({@code --precision}): the matmuls' operand precision and, for fp16, the dynamic
 * loss scaling that keeps small gradients from flushing to zero and catches the large ones that overflow.
 *
 * <ul>
 *   <li>{@link DType#FP32}: everything in fp32, as llm.c's {@code train_gpt2.c} (the default; bit for bit what the
 *       trainer did before precisions existed).</li>
 *   <li>{@link DType#BF16}: every matmul operand (forward and backward) rounded to bf16, products summed in fp32,
 *       and attention with BF16 operands ({@link io.accel4j.core.ops.AttentionOps}: q, k, v, the probabilities and
 *       the gradients rounded where a tensor-core FlashAttention kernel rounds them; on the GPU that kernel, which
 *       takes head sizes 64 and 128: at another, attention keeps fp32 operands, with a warning); master weights,
 *       optimizer state and gradients stay fp32; the activations the blocks save for backward are stored in bf16
 *       ({@link #activationStorage()}), every kernel reading and accumulating fp32. bf16 has fp32's range, so there is no
 *       loss scaling.</li>
 *   <li>{@link DType#FP16}: matmul operands rounded to fp16 (range ±65504, overflow to inf), fp32 accumulation,
 *       attention in fp32 (there is no fp16 attention kernel; the run's log says so), saved activations stored in
 *       fp16, and dynamic loss scaling
 *       ({@link LossScaler}) from {@code initialLossScale}, doubling after {@code lossScaleWindow} clean steps.</li>
 *   <li>fp8 ({@link #fp8(DelayedScaling)}): every block's linear layers (qkv, attproj, fc, fcproj) take FP8
 *       operands with delayed per-tensor scaling, Transformer Engine's hybrid recipe: inputs and weights E4M3,
 *       output gradients E5M2, each tensor of each layer with its own amax history
 *       ({@link io.accel4j.train.model.Fp8State}); fp32 accumulation, outputs, master weights and AdamW. The tied LM
 *       head, the model's last (and, through the embedding, first) layer, stays in {@code operands}' precision (fp32),
 *       as Transformer Engine keeps a model's first and last layers out of FP8: its logits feed the softmax
 *       directly and its weight is the token embedding. No loss scaling: the per-tensor scales cover the
 *       gradients' range.</li>
 * </ul>
 *
 * @param operands         FP32, BF16 or FP16: every matmul's, or under fp8 the LM head's
 * @param initialLossScale fp16's starting loss scale, a power of two in [1, 2^64] (ignored otherwise)
 * @param lossScaleWindow  fp16: clean steps before the scale doubles, ≥ 1 (ignored otherwise)
 * @param fp8              the blocks' FP8 recipe, or null when they take {@code operands} too
 * @param gradients        how the gradient buffers are stored ({@code --grad-storage}): FP32 (the default), BF16, or
 *                         FP16 (with fp16's loss scaling only: small gradients need the scale to stay representable);
 *                         16-bit storage keeps the blocks' and the final LayerNorm's gradients in 16 bits, every
 *                         kernel accumulating in fp32 ({@link io.accel4j.train.model.HalfWeights})
 */
public record Precision(DType operands, float initialLossScale, int lossScaleWindow, DelayedScaling fp8,
                        DType gradients) {

    /** fp16's default starting scale, 2^16 (PyTorch's GradScaler and Megatron-LM's start there too). */
    public static final float DEFAULT_LOSS_SCALE = 0x1p16f;
    /**
     * fp16's default growth window: 1000 clean steps, PyTorch's GradScaler's {@code growth_interval} (2000) halved
     * for runs of a few thousand steps: the scale can climb back within a run after a back-off.
     */
    public static final int DEFAULT_LOSS_SCALE_WINDOW = 1000;
    /** The largest initial scale accepted: 2^64 (fp32's range leaves room; beyond it every step would overflow). */
    public static final float MAX_INITIAL_LOSS_SCALE = 0x1p64f;

    /** Plain fp32. */
    public static final Precision FP32 = of(DType.FP32);

    public Precision {
        MatmulOps.checkOperands(operands);
        if (!(initialLossScale >= 1 && initialLossScale <= MAX_INITIAL_LOSS_SCALE)
                || initialLossScale != Math.scalb(1f, Math.getExponent(initialLossScale))) {
            throw new IllegalArgumentException("the loss scale must be a power of two in [1, 2^64] (so scaling and "
                    + "unscaling are exact), got " + initialLossScale);
        }
        if (lossScaleWindow < 1) {
            throw new IllegalArgumentException("the loss-scale window must be >= 1 step, got " + lossScaleWindow);
        }
        java.util.Objects.requireNonNull(gradients, "gradients");
        if (gradients != DType.FP32 && gradients != DType.BF16 && gradients != DType.FP16) {
            throw new IllegalArgumentException("the gradients are stored in fp32, bf16 or fp16, got " + gradients);
        }
        if (gradients == DType.FP16 && (operands != DType.FP16 || fp8 != null)) {
            throw new IllegalArgumentException("fp16 gradient storage needs fp16's loss scaling (precision fp16): "
                    + "without it small gradients flush to zero; store them in bf16 instead");
        }
    }

    /** fp32 gradient buffers. */
    public Precision(DType operands, float initialLossScale, int lossScaleWindow, DelayedScaling fp8) {
        this(operands, initialLossScale, lossScaleWindow, fp8, DType.FP32);
    }

    /** No FP8: {@code operands} for every matmul. */
    public Precision(DType operands, float initialLossScale, int lossScaleWindow) {
        this(operands, initialLossScale, lossScaleWindow, null);
    }

    /** This precision with the gradients stored in {@code gradients} (FP32, BF16, FP16). */
    public Precision withGradients(DType gradients) {
        return new Precision(operands, initialLossScale, lossScaleWindow, fp8, gradients);
    }

    /** The blocks' linear layers in FP8 with {@code recipe}, the LM head in fp32. */
    public static Precision fp8(DelayedScaling recipe) {
        Objects.requireNonNull(recipe, "recipe");
        return new Precision(DType.FP32, DEFAULT_LOSS_SCALE, DEFAULT_LOSS_SCALE_WINDOW, recipe);
    }

    /** {@code operands} with the default loss scaling. */
    public static Precision of(DType operands) {
        return new Precision(operands, DEFAULT_LOSS_SCALE, DEFAULT_LOSS_SCALE_WINDOW);
    }

    /**
     * How the activations the blocks save for backward are stored: in 16 bits under bf16 and fp16 (a 16-bit store
     * per block, fp32 working regions for one block; {@link io.accel4j.nn.NetworkSpec#activationStorage}), fp32
     * under fp32 and fp8.
     */
    public DType activationStorage() {
        return fp8 != null ? DType.FP32 : operands;
    }

    /** Whether the run scales its loss (fp16). */
    public boolean scalesLoss() {
        return operands == DType.FP16;
    }

    /** The name {@code --precision} takes: fp32, bf16, fp16 or fp8. */
    public String label() {
        return fp8 != null ? "fp8" : operands.name().toLowerCase(Locale.ROOT);
    }
}
