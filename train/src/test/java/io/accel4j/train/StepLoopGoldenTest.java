package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CLI's step loop ({@code accel4j train}'s GPT-2 learner, {@link Gpt2Fixtures}), bit for bit: the CRC-32 of every
 * step's loss, gradient norm, learning rate, loss scale and overflow flag, and of the parameters after the run, for
 * the paths the step takes (accumulation and clipping, fp16 loss scaling (a scale of 2^16 that grows every 2 steps;
 * one of 2^40 whose 8 steps all overflow and skip), bf16, FP8's amax histories, two ranks with overlapped buckets,
 * ZeRO-2 and -3 sharded unit by unit). The values (ZeRO rows included) were recorded from the CLI's former trainer
 * (its {@code trainStep}, the activations stored in fp32) as it stood before it was rebuilt on
 * {@code fit.StepRecipe} (the loop the Java API's {@code RankStep} shares), and the learner gives the same bits: the
 * first column at 512 bits (an AVX-512 machine), the second at 256 (a Zen 3, from the pre-refactoring tree 654bc43
 * with the ZeRO rows added, run on 2026-12-04; today's loop gives the same bits there). See {@link WidthGoldens}.
 */
class StepLoopGoldenTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    private static Precision precision(String p) {
        return switch (p) {
            case "fp32" -> Precision.FP32;
            case "bf16" -> Precision.of(DType.BF16);
            case "fp16" -> new Precision(DType.FP16, 0x1p16f, 2);
            case "fp16big" -> new Precision(DType.FP16, 0x1p40f, 1000);
            case "fp8" -> Precision.fp8(new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0,
                    DelayedScaling.Algorithm.MAX));
            default -> throw new IllegalArgumentException(p);
        };
    }

    /**
     * The CRC-32 of every step's loss, gradient norm, learning rate, loss scale, skip count and flag, the final
     * parameters' (gathered), and the skipped steps, of {@code cfg} on {@code ranks} ranks from seed 3's parameters.
     */
    private static String run(TrainConfig cfg, int ranks) {
        try (Arena arena = Arena.ofShared(); // the ranks gather into it
             Gpt2Fixtures.Run r = new Gpt2Fixtures.Run(cfg, Gpt2Fixtures.TINY, trainFile, null, 3, ranks,
                     Gpt2Fixtures.FP32_ACTIVATIONS)) {
            List<StepMetrics> steps = r.toEnd();
            CRC32 crc = new CRC32();
            int skipped = 0;
            for (StepMetrics s : steps) {
                crc.update(java.nio.ByteBuffer.allocate(29).putLong(Double.doubleToLongBits(s.trainLoss()))
                        .putLong(Double.doubleToLongBits(s.gradNorm())).putFloat(s.lr()).putFloat(s.lossScale())
                        .putInt(s.skippedSteps()).put((byte) (s.skipped() ? 1 : 0)).array());
                skipped = s.skippedSteps();
            }
            CRC32 params = new CRC32();
            params.update(Gpt2Fixtures.parameters(r.learner(), arena).asByteBuffer());
            return String.format("%08x %08x %d", crc.getValue(), params.getValue(), skipped);
        }
    }

    @ParameterizedTest(name = "{0} ranks, {1}, K={2}, clip {3}, buckets {4}, ZeRO-{5}")
    @CsvSource({
        "1, fp32, 2, 0.5, 0, 0, 8a0dec59 d35717ce 0, d913321c 2c6e2bd7 0",
        "1, bf16, 2, 0, 0, 0, 8572d5e8 14079f18 0, 3d6d2d37 6f738c5a 0",
        "1, fp16, 1, 1, 0, 0, db5f8dfa 5bbd88bd 0, cadd950a c369ac97 0",
        "1, fp16big, 1, 0, 0, 0, 6d64076c f056037d 8, 6d64076c f056037d 8",
        "1, fp8, 2, 0.5, 0, 0, 2cef83f3 2d39af56 0, c005d9df 5a7b7621 0",
        "2, fp16, 2, 0.5, 256, 0, 42d095c0 8edc049e 0, 3ed1a3f5 b8384cc7 0",
        "2, fp8, 1, 0, 0, 0, 8907256f d8b6c3c4 0, 24e77a4b ef2d7d83 0",
        "2, fp32, 2, 0.5, 0, 2, 932feb80 0cd8b5b7 0, 4f056fbc 38778866 0",
        "2, fp16, 1, 1, 0, 3, eb3fed09 3dbcba15 1, 9cce0339 8a331de5 1",
        "3, bf16, 2, 0, 0, 2, ef8601f7 10487281 0, ecdb44b6 aa618581 0"})
    void theStepLoopKeepsItsBits(int ranks, String p, int K, float clip, long buckets, int zero, String golden512,
                                 String golden256) {
        String golden = WidthGoldens.pick(golden512, golden256);
        TrainConfig cfg = Gpt2Fixtures.base().steps(8).gradAccum(K).gradClip(clip).weightDecay(0.1f)
                .bucketBytes(buckets).zeroStage(zero).precision(precision(p)).build();
        String got = run(cfg, ranks);
        assertThat(got).isEqualTo(golden);
    }
}
