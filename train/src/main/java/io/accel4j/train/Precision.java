package io.accel4j.train;

import io.accel4j.core.DType;
import io.accel4j.core.ops.MatmulOps;
import java.util.Locale;

/**
 * The arithmetic of a training run ({@code --precision}): the matmuls' operand precision and, for fp16, the dynamic
 * loss scaling that keeps small gradients from flushing to zero and catches the large ones that overflow.
 *
 * <ul>
 *   <li>{@link DType#FP32}: everything in fp32, as llm.c's {@code train_gpt2.c} (the default; bit for bit what the
 *       trainer did before precisions existed).</li>
 *   <li>{@link DType#BF16}: every matmul operand (forward and backward) rounded to bf16, products summed in fp32;
 *       master weights, optimizer state, activations between kernels and gradients stay fp32. bf16 has fp32's range,
 *       so there is no loss scaling.</li>
 *   <li>{@link DType#FP16}: matmul operands rounded to fp16 (range ±65504, overflow to inf), fp32 accumulation, and
 *       dynamic loss scaling ({@link LossScaler}) from {@code initialLossScale}, doubling after
 *       {@code lossScaleWindow} clean steps.</li>
 * </ul>
 *
 * @param operands         FP32, BF16 or FP16
 * @param initialLossScale fp16's starting loss scale, a power of two in [1, 2^64] (ignored otherwise)
 * @param lossScaleWindow  fp16: clean steps before the scale doubles, ≥ 1 (ignored otherwise)
 */
public record Precision(DType operands, float initialLossScale, int lossScaleWindow) {

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
    }

    /** {@code operands} with the default loss scaling. */
    public static Precision of(DType operands) {
        return new Precision(operands, DEFAULT_LOSS_SCALE, DEFAULT_LOSS_SCALE_WINDOW);
    }

    /** Whether the run scales its loss (fp16). */
    public boolean scalesLoss() {
        return operands == DType.FP16;
    }

    /** The name {@code --precision} takes: fp32, bf16 or fp16. */
    public String label() {
        return operands.name().toLowerCase(Locale.ROOT);
    }
}
