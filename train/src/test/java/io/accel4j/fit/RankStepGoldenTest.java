package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.WidthGoldens;
import java.util.List;
import java.util.zip.CRC32;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The Java API's step loop ({@code RankStep}), bit for bit: the CRC-32 of every step's loss, gradient norm, learning
 * rate, loss scale and skip flag over 10 steps of {@link LearnerTest}'s MLP, for accumulation with clipping, fp16
 * loss scaling, FP8 and ZeRO-2 over two ranks. Recorded before {@code RankStep} and the CLI's former trainer came
 * to share {@code StepRecipe}: the first column at 512 bits (an AVX-512 machine), the second at 256 (a Zen 3, from the
 * tree before that change, 654bc43, run on 2026-12-04; today's loop gives the same bits there). See
 * {@link WidthGoldens}.
 */
class RankStepGoldenTest {

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, ZeRO-{3}")
    @CsvSource({
        "1, fp32, 2, 0, 5c8182da, 64e6aee2",
        "2, fp16, 1, 0, 9c8abf53, 265e3042",
        "2, fp8, 2, 0, bcbc783e, 5d132302",
        "2, bf16, 1, 2, c1945be1, d2cc1495"})
    void theStepLoopKeepsItsBits(int ranks, String p, int K, int zero, String golden512, String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        LearnerBuilder b = LearnerTest.learner(ranks, 8).gradAccum(K).zero(zero);
        b = switch (p) {
            case "fp32" -> b;
            case "bf16" -> b.precision(DType.BF16);
            case "fp16" -> b.precision(DType.FP16);
            case "fp8" -> b.fp8(new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0, DelayedScaling.Algorithm.MAX));
            default -> throw new IllegalArgumentException(p);
        };
        List<StepMetrics> steps;
        try (Learner l = b.build()) {
            steps = l.fit(10, null);
        }
        CRC32 crc = new CRC32();
        for (StepMetrics s : steps) {
            crc.update(java.nio.ByteBuffer.allocate(29).putLong(Double.doubleToLongBits(s.trainLoss()))
                    .putLong(Double.doubleToLongBits(s.gradNorm())).putFloat(s.lr()).putFloat(s.lossScale())
                    .putInt(s.skippedSteps()).put((byte) (s.skipped() ? 1 : 0)).array());
        }
        String got = String.format("%08x", crc.getValue());
        assertThat(got).isEqualTo(golden);
    }
}
