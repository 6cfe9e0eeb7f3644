package io.accel4j.kernels.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The kernels issue's acceptance figures, from one run's results, each with its threshold (the table prints PASS or
 * FAIL): AdamW's bandwidth over a device copy's (≥ 0.85, {@link AdamWCases#ratio}), cuBLASLt's BF16 GEMM over
 * cuBLAS's at every shape (≥ 0.95, {@link GemmCases#ratios}), and the best BF16 flash-attention forward at head size
 * 128, T = 16k, non-causal, in TFLOP/s (≥ 370: FlashAttention-2's level on an H100; FlashAttention-3 reaches ~650).
 * A figure whose cases did not run is left out.
 */
final class Acceptance {

    /** The attention figure's shape ({@link AttentionCases.Shape#label}): B·T = 16k tokens, width 2048. */
    static final String ATTENTION_SHAPE = "hd128 T16384 B1 NH16 full";
    /** TFLOP/s the best BF16 forward must reach there. */
    static final double ATTENTION_TFLOPS = 370;

    private Acceptance() {}

    static List<Report.Ratio> ratios(List<Result> results) {
        List<Report.Ratio> ratios = new ArrayList<>();
        AdamWCases.ratio(results).ifPresent(ratios::add);
        ratios.addAll(GemmCases.ratios(results));
        bestAttentionForward(results).ifPresent(r -> ratios.add(new Report.Ratio("attention " + ATTENTION_SHAPE
                + ": best bf16 forward TFLOP/s (" + r.kernel() + ")", r.value(), ATTENTION_TFLOPS)));
        return ratios;
    }

    /** The fastest BF16 flash forward ("flash bf16… fwd") at {@link #ATTENTION_SHAPE} that ran. */
    private static Optional<Result> bestAttentionForward(List<Result> results) {
        return results.stream().filter(r -> r.ok() && r.group().equals("attention")
                        && r.kernel().startsWith("flash bf16") && r.kernel().endsWith(" fwd")
                        && r.shape().equals(ATTENTION_SHAPE))
                .max((a, b) -> Double.compare(a.value(), b.value()));
    }
}
