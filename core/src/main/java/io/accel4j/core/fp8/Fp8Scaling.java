package io.accel4j.core.fp8;

import io.accel4j.core.DType;
import java.util.Objects;

/**
 * The FP8 operands of one linear layer ({@link io.accel4j.core.ops.MatmulOps}' FP8 methods): the delayed-scaling
 * state ({@link AmaxHistory}) of each tensor the layer casts to FP8. A backend casts {@code inp}, {@code weight} and
 * {@code dout} with their history's {@link AmaxHistory#scale()} (the scale from earlier steps), multiplies the codes
 * with fp32 accumulation, dequantises by the product of the {@link AmaxHistory#scaleInv()}s, and
 * {@link AmaxHistory#record records} the amax each cast measured; it never {@link AmaxHistory#update()}s (the owner
 * does that once per optimizer step).
 *
 * <p>Under the hybrid recipe ({@link DelayedScaling.Format#HYBRID}) {@code input} and {@code weight} are E4M3 and
 * {@code gradOutput} E5M2: forward {@code inp(E4M3)·weight(E4M3)ᵀ}, backward {@code dout(E5M2)·weight(E4M3)} and
 * {@code dout(E5M2)ᵀ·inp(E4M3)}.
 *
 * @param input      the layer's input {@code inp (N, C)}
 * @param weight     its weight {@code (OC, C)}
 * @param gradOutput the gradient of its output {@code dout (N, OC)}, cast in backward only
 */
public record Fp8Scaling(AmaxHistory input, AmaxHistory weight, AmaxHistory gradOutput) {

    public Fp8Scaling {
        Objects.requireNonNull(input, "input");
        Objects.requireNonNull(weight, "weight");
        Objects.requireNonNull(gradOutput, "gradOutput");
        if (input == weight || input == gradOutput || weight == gradOutput) {
            throw new IllegalArgumentException("input, weight and gradOutput need a history each (one was passed "
                    + "twice): each tensor's amax must be tracked on its own");
        }
        checkPair("input", input, "weight", weight);
        checkPair("gradOutput", gradOutput, "weight", weight);
        checkPair("gradOutput", gradOutput, "input", input);
    }

    /** Fresh histories (scale 1, no amax) for the three tensors of one layer under {@code recipe}. */
    public static Fp8Scaling of(DelayedScaling recipe) {
        Objects.requireNonNull(recipe, "recipe");
        return new Fp8Scaling(recipe.newHistory(DelayedScaling.Role.ACTIVATION),
                recipe.newHistory(DelayedScaling.Role.WEIGHT), recipe.newHistory(DelayedScaling.Role.GRADIENT));
    }

    /** Ends the step for the three tensors ({@link AmaxHistory#update()}). */
    public void update() {
        input.update();
        weight.update();
        gradOutput.update();
    }

    /** E5M2 × E5M2 has no FP8 GEMM (cuBLASLt) and no precision to spare: one operand of each product must be E4M3. */
    private static void checkPair(String aName, AmaxHistory a, String bName, AmaxHistory b) {
        if (a.format() == DType.FP8_E5M2 && b.format() == DType.FP8_E5M2) {
            throw new IllegalArgumentException(aName + " and " + bName + " are multiplied together but are both "
                    + "FP8_E5M2: one of them must be FP8_E4M3");
        }
    }
}
