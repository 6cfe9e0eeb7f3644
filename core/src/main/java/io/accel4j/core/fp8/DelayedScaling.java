package io.accel4j.core.fp8;

import io.accel4j.core.DType;
import java.util.Objects;

/**
 * The delayed-scaling FP8 recipe (Transformer Engine's {@code DelayedScaling}): each tensor that is cast to FP8 keeps
 * a window of the amaxes of its last {@link #historyLength()} steps, and the scale it is cast with this step comes
 * from that window, i.e. from <em>earlier</em> steps; the amax this step's cast measures joins the window for the
 * next step. Per tensor the state is an {@link AmaxHistory}; this record is the recipe shared by every tensor.
 *
 * <p>The scale: {@code scale = fp8Max / amax · 2^−margin}, {@code amax} being the window's maximum
 * ({@link Algorithm#MAX}) or the last step's ({@link Algorithm#MOST_RECENT}); a value {@code x} is encoded as
 * {@code fp8(x·scale)} (saturating) and the GEMM multiplies its result by {@code 1/scale} of each operand. The rules
 * for amaxes that give no usable scale are {@link AmaxHistory#update()}'s.
 *
 * <p>Formats: {@link Format#E4M3} casts every tensor to E4M3; {@link Format#HYBRID} casts activations and weights to
 * E4M3 (more precision: 3 mantissa bits, max 448) and gradients to E5M2 (more range: 2 mantissa bits, max 57344), as
 * Transformer Engine's {@code Format.HYBRID} does.
 *
 * @param format        which FP8 type each {@link Role} gets
 * @param historyLength steps of amax kept per tensor, ≥ 1 (Transformer Engine's default is 1024)
 * @param margin        the scale is divided by {@code 2^margin}, 0 ≤ margin ≤ 32, head room against growth
 * @param algorithm     which amax of the window the scale is computed from
 */
public record DelayedScaling(Format format, int historyLength, int margin, Algorithm algorithm) {

    /** What a tensor is in a linear layer: its FP8 type depends on it under {@link Format#HYBRID}. */
    public enum Role { ACTIVATION, WEIGHT, GRADIENT }

    /** FP8 type per role. */
    public enum Format {
        /** Every tensor E4M3. */
        E4M3,
        /** Activations and weights E4M3, gradients E5M2. */
        HYBRID
    }

    /** The amax a new scale is computed from. */
    public enum Algorithm {
        /** The largest amax of the window (Transformer Engine's default {@code "max"}). */
        MAX,
        /** The last completed step's amax ({@code "most_recent"}). */
        MOST_RECENT
    }

    /** The largest margin accepted: a scale divided by more than 2³² is no longer a margin. */
    public static final int MAX_MARGIN = 32;

    public DelayedScaling {
        Objects.requireNonNull(format, "format");
        Objects.requireNonNull(algorithm, "algorithm");
        if (historyLength < 1) {
            throw new IllegalArgumentException("historyLength must be >= 1, got " + historyLength);
        }
        if (margin < 0 || margin > MAX_MARGIN) {
            throw new IllegalArgumentException("margin must be in [0, " + MAX_MARGIN + "], got " + margin);
        }
    }

    /** Transformer Engine's defaults: HYBRID, a history of 1024 steps, margin 0, the window's maximum. */
    public static DelayedScaling defaults() {
        return new DelayedScaling(Format.HYBRID, 1024, 0, Algorithm.MAX);
    }

    /** The FP8 type tensors of {@code role} are cast to. */
    public DType dtype(Role role) {
        Objects.requireNonNull(role, "role");
        return format == Format.HYBRID && role == Role.GRADIENT ? DType.FP8_E5M2 : DType.FP8_E4M3;
    }

    /** A fresh history (scale 1, every amax 0) for a tensor of {@code role}. */
    public AmaxHistory newHistory(Role role) {
        return new AmaxHistory(dtype(role), historyLength, margin, algorithm);
    }
}
