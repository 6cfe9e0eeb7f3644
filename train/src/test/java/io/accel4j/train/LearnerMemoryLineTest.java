package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Recompute;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The CLI trainer's start-up memory lines (the model's bytes and activations, and
 * {@code ZeroMemory.describe(modelStateBytes, workingBytes)}, the ZeRO paper's accounting and what the rank allocated)
 * from a GPT-2 {@link Learner} on the trainer's parts ({@link LearnerGpt2Test#builder}): the trainer's lines and byte
 * counts for one rank, DDP and ZeRO-1/2/3 at 2 and 3 ranks, the recomputation varied (ZeRO-2/3's sharded units and
 * working buffers included) — goldens recorded while the two ran side by side (the same lines). Byte counts do not
 * depend on the vector width: one golden a row.
 */
class LearnerMemoryLineTest {

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

    private static String line(String described, long held, long working) {
        return described + " [" + held + " bytes, " + working + " working]";
    }

    /** The recomputation the runs keep (the model line's activations): one kind for each stage, to vary them. */
    private static Recompute recompute(TrainConfig cfg) {
        return Recompute.values()[cfg.zeroStage() % Recompute.values().length];
    }

    /** Rank 0's line as the trainer printed it at start-up, [its byte counts], model and activation bytes. */
    static Stream<Arguments> theTrainersLines() {
        return Stream.of(
                Arguments.of(1, 0, "ZeRO-0 over 1 rank (fp32 model states): per rank params 0.0 MiB + gradients 0.0 "
                        + "MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB [31232 "
                        + "bytes, 0 working] model 32976, activations 17360"),
                Arguments.of(2, 0, "ZeRO-0 over 2 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "[31232 bytes, 0 working] model 32976, activations 17360"),
                Arguments.of(2, 1, "ZeRO-1 over 2 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "[23424 bytes, 0 working] model 31696, activations 16080"),
                Arguments.of(3, 1, "ZeRO-1 over 3 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "[20816 bytes, 0 working] model 31696, activations 16080"),
                Arguments.of(2, 2, "ZeRO-2 over 2 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "(0.0 MiB of it working buffers for the units in use) [27328 bytes, 7808 working] model "
                        + "31056, activations 11536"),
                Arguments.of(3, 2, "ZeRO-2 over 3 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "(0.0 MiB of it working buffers for the units in use) [23404 bytes, 7808 working] model "
                        + "29748, activations 11536"),
                Arguments.of(2, 3, "ZeRO-3 over 2 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "(0.0 MiB of it working buffers for the units in use) [31232 bytes, 15616 working] model "
                        + "40784, activations 17360"),
                Arguments.of(3, 3, "ZeRO-3 over 3 ranks (fp32 model states): per rank params 0.0 MiB + gradients "
                        + "0.0 MiB + AdamW m,v 0.0 MiB = 0.0 MiB (plain DDP: 0.0 MiB); this rank holds 0.0 MiB "
                        + "(0.0 MiB of it working buffers for the units in use) [26000 bytes, 15616 working] model "
                        + "38168, activations 17360"));
    }

    @ParameterizedTest(name = "{0} ranks, ZeRO-{1}")
    @MethodSource("theTrainersLines")
    void theLearnersMemoryLinesAreTheTrainers(int ranks, int zero, String golden) {
        TrainConfig cfg = LearnerGpt2Test.cfg("fp32", 1, 0f, zero, 0);
        try (TokenSource data = new TokenSource(TokenShards.of(trainFile), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = LearnerGpt2Test.builder(cfg, ranks, recompute(cfg), DType.FP32, data).build()) {
            String now = line(l.zeroMemory().describe(l.modelStateBytes(), l.workingBytes()), l.modelStateBytes(),
                    l.workingBytes()) + " model " + l.modelBytes() + ", activations "
                    + l.network().activationBytes();
            assertThat(now).isEqualTo(golden);
            assertThat(l.workingBytes() > 0).as("working buffers").isEqualTo(zero >= 2);
        }
    }
}
