package io.accel4j.cli.train;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.precision.Precision;
import java.util.Locale;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train}'s precision options: {@code --precision} and the flags that tune one precision (fp16's loss scaling,
 * fp8's delayed scaling), checked together into a {@link Precision}; and the run log's description of it.
 */
public final class PrecisionOptions {

    /** --fp8-history's default: Transformer Engine's {@code amax_history_len} (1024 since TE 1.x; it was 1 before). */
    static final int FP8_HISTORY = 1024;

    @Option(names = "--precision", paramLabel = "fp32|bf16|fp16|fp8", defaultValue = "fp32",
            converter = Precisions.class, description = "Matmul operand precision, fp32 accumulation, fp32 master "
            + "weights: fp32; bf16; fp16 with dynamic loss scaling (bf16 and fp16 also store the activations saved for "
            + "backward in 16 bits); or fp8: the blocks' linear layers with FP8 "
            + "operands (E4M3 activations and weights, E5M2 gradients) and delayed per-tensor scaling, the LM head "
            + "in fp32 (default: ${DEFAULT-VALUE}).")
    DType precision;
    @Option(names = "--grad-storage", paramLabel = "fp32|bf16|fp16", defaultValue = "fp32",
            converter = GradientStorages.class, description = "How the gradient buffers are stored: fp32; bf16; or "
            + "fp16 (with --precision fp16 only: its loss scaling keeps small gradients representable). 16-bit "
            + "storage keeps the blocks' and the final LayerNorm's gradients in 16 bits (each block's backward "
            + "accumulates into one layer's fp32 region, rounded back after it), the embeddings' in fp32; one rank, "
            + "DDP, --zero 1 or --offload-optimizer (default: ${DEFAULT-VALUE}).")
    DType gradStorage;
    @Option(names = "--fp8-history", paramLabel = "N", description = "fp8: steps of amax each tensor's scale is "
            + "computed from (the window's maximum) (default: " + FP8_HISTORY + ", Transformer Engine's).")
    Integer fp8History;
    @Option(names = "--fp8-margin", paramLabel = "M", description = "fp8: scale = fp8_max / amax / 2^M, head room "
            + "against growth, in [0, 32] (default: 0, Transformer Engine's).")
    Integer fp8Margin;
    @Option(names = "--loss-scale", paramLabel = "X", description = "fp16: the initial loss scale, a power of two "
            + "in [1, 2^64] (default: 65536 = 2^16).")
    Float lossScale;
    @Option(names = "--loss-scale-window", paramLabel = "N", description = "fp16: clean steps before the loss scale "
            + "doubles; an overflow skips the step and halves it (default: 1000).")
    Integer lossScaleWindow;

    /**
     * --precision with --loss-scale and --loss-scale-window, which only fp16 takes, and --fp8-history and
     * --fp8-margin, which only fp8 takes; a bad combination or value is {@code usage}'s exception, naming the flags.
     */
    Precision precision(Function<String, ? extends RuntimeException> usage) {
        String name = Precisions.label(precision);
        if (precision != DType.FP16 && (lossScale != null || lossScaleWindow != null)) {
            throw usage.apply("--loss-scale and --loss-scale-window apply to --precision fp16 only (this run is "
                    + name + ")");
        }
        if (precision != Precisions.FP8 && (fp8History != null || fp8Margin != null)) {
            throw usage.apply("--fp8-history and --fp8-margin apply to --precision fp8 only (this run is " + name
                    + ")");
        }
        if (gradStorage == DType.FP16 && precision != DType.FP16) {
            throw usage.apply("--grad-storage fp16 needs --precision fp16, whose loss scaling keeps small gradients "
                    + "representable (this run is " + name + "): use --grad-storage bf16");
        }
        if (precision == Precisions.FP8) {
            int history = fp8History != null ? fp8History : FP8_HISTORY, margin = fp8Margin != null ? fp8Margin : 0;
            if (history < 1) {
                throw usage.apply("--fp8-history must be >= 1 step, got " + history);
            }
            if (margin < 0 || margin > DelayedScaling.MAX_MARGIN) {
                throw usage.apply("--fp8-margin must be in [0, " + DelayedScaling.MAX_MARGIN + "], got " + margin);
            }
            return Precision.fp8(new DelayedScaling(DelayedScaling.Format.HYBRID, history, margin,
                    DelayedScaling.Algorithm.MAX)).withGradients(gradStorage);
        }
        try {
            return new Precision(precision, lossScale != null ? lossScale : Precision.DEFAULT_LOSS_SCALE,
                    lossScaleWindow != null ? lossScaleWindow : Precision.DEFAULT_LOSS_SCALE_WINDOW)
                    .withGradients(gradStorage);
        } catch (IllegalArgumentException e) {
            throw usage.apply(e.getMessage().replace("the loss scale", "--loss-scale")
                    .replace("the loss-scale window", "--loss-scale-window"));
        }
    }

    /**
     * Refuses, with one line naming both flags, 16-bit gradient storage with what cannot take it yet: ZeRO-2/3
     * (they hold fp32 gradient shards; ZeRO-1 takes them), --sync async, --pp, --tp, and an explicit --bucket-mb
     * ({@code bucketsAsked}: 16-bit gradients are all-reduced after backward, not in buckets). {@code offload}
     * (--offload-optimizer) goes with them: the gradients are widened chunk by chunk on their way to the host.
     */
    static void checkGradients(TrainConfig cfg, boolean async, boolean pipeline, boolean tensor, boolean offload,
                               boolean bucketsAsked, Function<String, ? extends RuntimeException> usage) {
        DType g = cfg.precision().gradients();
        if (g == DType.FP32) {
            return;
        }
        String other = cfg.zeroStage() > 1 ? "--zero " + cfg.zeroStage() : async ? "--sync async"
                : pipeline ? "--pp" : tensor ? "--tp" : null;
        if (other != null) {
            throw usage.apply("--grad-storage " + Precisions.label(g) + " does not go with " + other + " yet: drop "
                    + "one of them");
        }
        if (bucketsAsked) {
            throw usage.apply("--bucket-mb does not go with --grad-storage " + Precisions.label(g) + ": 16-bit "
                    + "gradients are all-reduced after backward, chunk by chunk, not in buckets; drop --bucket-mb");
        }
    }

    /** {@code fp32|bf16|fp16}, case-insensitive: {@code --grad-storage}. */
    static final class GradientStorages implements picocli.CommandLine.ITypeConverter<DType> {
        @Override
        public DType convert(String s) {
            return switch (s.toLowerCase(Locale.ROOT)) {
                case "fp32" -> DType.FP32;
                case "bf16" -> DType.BF16;
                case "fp16" -> DType.FP16;
                default -> throw new picocli.CommandLine.TypeConversionException("'" + s
                        + "' is not a gradient storage: fp32, bf16 or fp16");
            };
        }
    }

    /**
     * ", bf16 matmul and attention operands" or ", fp16 matmul operands, fp32 attention, loss scale 65536 (x2 after
     * 1000 clean steps)", given the attention precision the model settled on
     * ({@link io.accel4j.train.model.Gpt2#attentionOperands}).
     */
    static String describe(Precision p, DType attention) {
        String grads = p.gradients() == DType.FP32 ? "" : ", gradients stored in " + Precisions.label(p.gradients());
        if (p.fp8() != null) {
            return String.format(Locale.ROOT, ", fp8 linear layers (E4M3 x E4M3 forward, E5M2 gradients, fp32 "
                    + "accumulation; delayed scaling: amax history %d, margin %d), fp32 LM head",
                    p.fp8().historyLength(), p.fp8().margin()) + grads;
        }
        String stored = ", saved activations in " + Precisions.label(p.activationStorage()) + grads;
        if (!p.scalesLoss()) {
            return p.operands() == DType.FP32 ? grads : (attention == DType.BF16
                    ? ", bf16 matmul and attention operands (fp32 accumulation)"
                    : ", bf16 matmul operands (fp32 accumulation), fp32 attention (no bf16 attention for this head "
                            + "size here)") + stored;
        }
        return String.format(Locale.ROOT, ", fp16 matmul operands (fp32 accumulation), fp32 attention, loss scale "
                + "%.0f (x2 after %d clean steps, /2 and skip on overflow)", p.initialLossScale(), p.lossScaleWindow())
                + stored;
    }

    /**
     * {@code fp32|bf16|fp16|fp8}, case-insensitive (also for {@code accel4j bench train}). fp8 is read as
     * {@link #FP8}, which stands for the hybrid FP8 recipe ({@link Precision#fp8}), not for E4M3 everywhere.
     */
    public static final class Precisions implements picocli.CommandLine.ITypeConverter<DType> {
        /** What {@code fp8} converts to: the hybrid recipe (E4M3 activations and weights, E5M2 gradients). */
        public static final DType FP8 = DType.FP8_E4M3;

        @Override
        public DType convert(String s) {
            return switch (s.toLowerCase(Locale.ROOT)) {
                case "fp32" -> DType.FP32;
                case "bf16" -> DType.BF16;
                case "fp16" -> DType.FP16;
                case "fp8" -> FP8;
                default -> throw new picocli.CommandLine.TypeConversionException("'" + s
                        + "' is not a precision: fp32, bf16, fp16 or fp8");
            };
        }

        /** The name a converted precision was given: fp32, bf16, fp16 or fp8. */
        public static String label(DType precision) {
            return precision == FP8 ? "fp8" : precision.name().toLowerCase(Locale.ROOT);
        }
    }
}
