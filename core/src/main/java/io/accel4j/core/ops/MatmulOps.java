package io.accel4j.core.ops;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.Fp8Scaling;
import java.lang.foreign.MemorySegment;

/**
 * A linear layer, weights stored (out, in) as in PyTorch and llm.c.
 *
 * <p><b>Operand precision.</b> Every method takes the precision its products are formed in, {@code operands}:
 * <ul>
 *   <li>{@link DType#FP32}: the fp32 values as they are (the methods without the argument).</li>
 *   <li>{@link DType#BF16} or {@link DType#FP16}: every operand of every product — {@code inp} and {@code weight}
 *       forward; {@code dout}, {@code weight} (for dinp) and {@code dout}, {@code inp} (for dweight) backward — is
 *       first rounded to that format, to nearest, ties to even, exactly as {@link io.accel4j.core.Bf16#fromFloat} and
 *       {@link io.accel4j.core.Fp16#fromFloat} do (fp16 with its real range: a magnitude of 65520 or more becomes
 *       ±inf, so an overflow shows up as inf or NaN in the outputs), then the rounded values are multiplied and
 *       summed in fp32. The buffers themselves stay fp32 and are not modified; {@code out}, the gradients, the bias
 *       and {@code dbias} (the sum of the unrounded {@code dout}) are fp32. This is what a GPU's bf16/fp16 tensor-core
 *       GEMM with fp32 accumulation computes, up to the order of the fp32 additions.</li>
 * </ul>
 * Any other {@code operands} is an {@link IllegalArgumentException}; a backend that lacks a precision throws
 * {@link UnsupportedOperationException}.
 *
 * <p><b>FP8 operands</b> (the methods taking an {@link Fp8Scaling}, delayed scaling as Transformer Engine does it):
 * each operand {@code x} of a product is cast to its history's FP8 type with the history's current scale,
 * {@code q = fp8(x·scale)} (round to nearest even, saturating at ±max, as {@link CastOps#castToFp8}), the codes are
 * multiplied and summed in fp32, and the sum is multiplied by the two operands' {@code scaleInv}s:
 * forward {@code out = (scaleInv_inp·scaleInv_w)·Σ q_inp·q_w + bias}; backward
 * {@code dinp += (scaleInv_dout·scaleInv_w)·Σ q_dout·q_w}, {@code dweight += (scaleInv_dout·scaleInv_inp)·Σ q_dout·q_inp}
 * and {@code dbias += Σ_rows dout} (fp32, unrounded). The amax ({@code max |x|}) of every cast is
 * {@link io.accel4j.core.fp8.AmaxHistory#record recorded} into that tensor's history; the scales are not updated
 * (the caller does that once per step). The fp32 buffers are not modified and the outputs are fp32. A backend may
 * require sizes its FP8 GEMM supports (the GPU: multiples of 16) and says so with an
 * {@link IllegalArgumentException}.
 *
 * <p><b>When the amaxes arrive.</b> A backend may record an FP8 cast's amax at the call (the CPU) or defer it until
 * {@link #flushAmaxes()} (the GPU keeps them in device memory, so that a cast never waits for the device). So the
 * owner of the histories calls {@code flushAmaxes()} before it reads them or ends the step: before
 * {@link io.accel4j.core.fp8.AmaxHistory#update()}, {@code amaxes()}, a checkpoint's copy of them or a
 * {@code restore}. A flush records each pending amax into its history (the maximum of that history's casts since
 * the last flush, which is what recording them one by one gives); the scales a cast uses are read from the histories
 * at the call, so a step's casts see the scales of the last {@code update()} either way.
 */
public interface MatmulOps {

    /** {@code out (N,OC) = inp (N,C) · weightᵀ (C,OC) + bias (OC)}, fp32 operands; {@code bias} may be null. */
    default void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                               int N, int C, int OC) {
        matmulForward(out, inp, weight, bias, N, C, OC, DType.FP32);
    }

    /**
     * {@code dinp (N,C) += dout · weight}, {@code dweight (OC,C) += doutᵀ · inp}, {@code dbias (OC) += Σ_rows dout}
     * ({@code dbias} may be null when the layer has no bias), fp32 operands.
     */
    default void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                                MemorySegment inp, MemorySegment weight, int N, int C, int OC) {
        matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, DType.FP32);
    }

    /** {@link #matmulForward(MemorySegment, MemorySegment, MemorySegment, MemorySegment, int, int, int)} with
     *  products of {@code operands} precision (see the interface comment). */
    void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                       int N, int C, int OC, DType operands);

    /** {@link #matmulBackward(MemorySegment, MemorySegment, MemorySegment, MemorySegment, MemorySegment,
     *  MemorySegment, int, int, int)} with products of {@code operands} precision (see the interface comment). */
    void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                        MemorySegment inp, MemorySegment weight, int N, int C, int OC, DType operands);

    /**
     * {@code out (N,OC) = inp (N,C) · weightᵀ (C,OC) + bias (OC)} with FP8 operands scaled by {@code fp8}'s
     * {@code input} and {@code weight} histories, whose amaxes it records (see the interface comment).
     */
    void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                       int N, int C, int OC, Fp8Scaling fp8);

    /**
     * {@code dinp += dout · weight}, {@code dweight += doutᵀ · inp}, {@code dbias += Σ_rows dout} with FP8 operands:
     * {@code dout} by {@code fp8}'s {@code gradOutput} history, {@code weight} and {@code inp} by theirs (the same
     * scales as the forward of this step), amaxes recorded (see the interface comment).
     */
    void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                        MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8);

    /**
     * The MLP's first linear layer with its GELU fused: {@code pre (N,OC) = inp (N,C)·weightᵀ + bias (OC)} and
     * {@code out (N,OC) = gelu(pre)}, the tanh GELU of {@link PointwiseOps#geluForward} applied to the fp32
     * {@code pre}; {@code bias} may be null. Both outputs are written and fp32; backward needs {@code pre}
     * ({@link #matmulBackwardGelu}), so it is always stored. With BF16/FP16 {@code operands} only the two operands of
     * the product are rounded (as {@link #matmulForward(MemorySegment, MemorySegment, MemorySegment, MemorySegment,
     * int, int, int, DType) matmulForward}); the bias add, {@code pre} and the GELU are fp32, so {@code out} is
     * exactly {@code geluForward} of the {@code pre} written. Same results as {@code matmulForward} into {@code pre}
     * then {@code geluForward(out, pre)} (a backend may round GELU differently, as its {@code geluForward} does).
     * {@code out} and {@code pre} must not overlap each other or the inputs. FP8 linear layers have no fused form.
     * {@link Ops} has a default that composes the unfused ops.
     */
    void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                           MemorySegment bias, int N, int C, int OC, DType operands);

    /**
     * The MLP's projection backward with the GELU backward of the layer before fused into its input gradient, for a
     * projection whose input is {@code inp = gelu(pre)} ({@link #matmulForwardGelu}'s {@code out}, or recomputed):
     * <pre>
     *   dweight  (OC,C) += doutᵀ·inp            dbias    (OC) += Σ_rows dout      (dbias may be null)
     *   dpre     (N,C)   = gelu'(pre) ⊙ (dout·weight)                              (<b>written</b>, not added)
     *   dpreBias (C)    += Σ_rows dpre                                            (dpreBias may be null)
     * </pre>
     * {@code dpre} is the gradient of the first linear layer's output, so {@code dpreBias} is that layer's bias
     * gradient: a caller that passes it here passes a null {@code dbias} to that layer's
     * {@link #matmulBackward(MemorySegment, MemorySegment, MemorySegment, MemorySegment, MemorySegment,
     * MemorySegment, int, int, int, DType) matmulBackward} with {@code dout = dpre}, or the sum is added twice.
     * {@code dpre} is written, unlike every other gradient of this package, because a fused GEMM epilogue applies
     * gelu' to the product before it stores it (cuBLASLt's DGELU epilogue scales {@code alpha·A·B + beta·C} as a
     * whole): its old contents are ignored (they may be NaN). With BF16/FP16 {@code operands}, {@code dout},
     * {@code weight} and {@code inp} are rounded in the two products only; {@code gelu'} is taken of the fp32
     * {@code pre}, the product with it, {@code dpre} and both bias sums are fp32 ({@code dbias} of the unrounded
     * {@code dout}, {@code dpreBias} of {@code dpre}). {@code dpre} equals {@code matmulBackward}'s dinp (added to
     * zeros) followed by {@code geluBackward} into zeros; {@code dpreBias} may sum its rows in another order than
     * the unfused bias gradient. The gradients must not overlap each other or the inputs. {@link Ops} has a default
     * that composes the unfused ops.
     */
    void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight, MemorySegment dbias,
                            MemorySegment dout, MemorySegment inp, MemorySegment pre, MemorySegment weight,
                            int N, int C, int OC, DType operands);

    /**
     * The linear layer's size checks, shared by every backend (fp32/bf16/fp16 and FP8): N, C, OC ≥ 1. The segments
     * are checked by each backend's GEMM, whose argument names differ.
     */
    static void checkSizes(int N, int C, int OC) {
        OpChecks.positive("N", N);
        OpChecks.positive("C", C);
        OpChecks.positive("OC", OC);
    }

    /**
     * Checks an operand precision: returns it when it is FP32, BF16 or FP16.
     *
     * @throws IllegalArgumentException for null or any other type
     */
    static DType checkOperands(DType operands) {
        if (operands != DType.FP32 && operands != DType.BF16 && operands != DType.FP16) {
            throw new IllegalArgumentException("matmul operands must be FP32, BF16 or FP16, got " + operands);
        }
        return operands;
    }

    /**
     * Records into their {@link io.accel4j.core.fp8.AmaxHistory histories} the amaxes of the FP8 casts this backend
     * has deferred (see the interface comment), after the work queued before; a no-op when none is pending. The
     * default, for backends that record at the call, does nothing.
     */
    default void flushAmaxes() {
    }
}
