package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.train.Gpt2LearnerRuns;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ZeRO-2 and 3 on a GPT-2 {@link Learner} ({@code fit.UnitSharding} over {@code fit.ShardedModel}, unit by unit over
 * GPT-2's own unit scopes, and {@code optim.AdamW}) keep the CLI trainer's bits: the CRC-32 of every step's loss,
 * gradient norm, loss scale and skip flag (before and after a checkpoint at step 4), of the checkpoint's llm.c model
 * and state files ({@link LearnerLlmcCheckpoints}), of the parameters after 6 steps, and of a resume from the
 * checkpoint (into a learner initialised otherwise), which must continue with the uninterrupted run's bits. The golden
 * values were recorded on the old trainer (its sharded states, which ran side by side with the {@code ZeroOptimizer}
 * states they replaced and asserted the two equal in every one of these before that class was deleted): the first
 * value column at 512 bits, the second at 256 (both on the AMD EPYC Zen 3 machine, 512 through
 * {@code -Daccel4j.vector.bits=512}; see {@link io.accel4j.train.WidthGoldens}). Cases: 2 and 3 ranks, stages 2 and 3,
 * one and several micro-batches, clipping on and off, fp32, bf16 and fp16 (whose loss scale of 2^16, growing every 2
 * steps, overflows and skips), weight decay on the matrices only or on everything, one layer (stage 2's scratch chunk)
 * and two.
 */
class ZeroShardingGoldenTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static final int STEPS = 6;
    private static final int SAVE_AT = 4;

    @BeforeAll
    static void setUp() throws IOException {
        int[] t = new int[600];
        Random r = new Random(31);
        for (int i = 1; i < t.length; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(11) : (t[i - 1] + 1) % 11;
        }
        TokenFile.write(tmp.resolve("train.bin"), t);
        trainFile = TokenFile.open(tmp.resolve("train.bin"));
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
            default -> throw new IllegalArgumentException(p);
        };
    }

    /** What a run showed: the steps' bits (before and after the checkpoint), the files of the checkpoint, the parameters, the resumed steps' bits. */
    private record Seen(String steps, byte[] model, byte[] state, String params, String resumed, String resumedParams) {}

    /** Each step's bits into {@code crc}. */
    private static void steps(java.util.List<StepMetrics> steps, CRC32 crc) {
        for (StepMetrics s : steps) {
            crc.update(ByteBuffer.allocate(25).putLong(Double.doubleToLongBits(s.trainLoss()))
                    .putLong(Double.doubleToLongBits(s.gradNorm())).putFloat(s.lossScale())
                    .putInt(s.skippedSteps()).put((byte) (s.skipped() ? 1 : 0)).array());
        }
    }

    /** The CRC-32 of the whole parameters (gathered from the shards). */
    private static String params(Learner l) {
        try (Arena a = Arena.ofShared()) {
            MemorySegment host = a.allocate(l.wholeTable().count() * Float.BYTES, 64);
            l.gatherParameters(host);
            CRC32 crc = new CRC32();
            crc.update(host.asByteBuffer());
            return String.format("%08x", crc.getValue());
        }
    }

    private static Seen run(int ranks, GptConfig c, TrainConfig cfg, Path dir) throws IOException {
        String steps, params, resumed, resumedParams;
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
             Learner l = Gpt2LearnerRuns.builder(c, cfg, ranks, data).build()) {
            Gpt2LearnerRuns.initialised(l, c, cfg, data, 1);
            CRC32 before = new CRC32(), after = new CRC32();
            steps(l.fit(SAVE_AT, null), before);
            Gpt2LearnerRuns.checkpoints(l, c, cfg, data).save(dir);
            steps(l.fit(STEPS - SAVE_AT, null), after);
            steps = String.format("%08x %08x", before.getValue(), after.getValue());
            params = params(l);
        }
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
             Learner l = Gpt2LearnerRuns.builder(c, cfg, ranks, data).build()) {
            Gpt2LearnerRuns.initialised(l, c, cfg, data, 99); // other init: overwritten
            Gpt2LearnerRuns.checkpoints(l, c, cfg, data).resume(dir);
            CRC32 crc = new CRC32();
            steps(l.fit(STEPS - l.step(), null), crc);
            resumed = String.format("%08x", crc.getValue());
            resumedParams = params(l);
        }
        String name = String.format("%08d", SAVE_AT);
        return new Seen(steps, Files.readAllBytes(dir.resolve("model_" + name + ".bin")),
                Files.readAllBytes(dir.resolve("state_" + name + ".bin")), params, resumed, resumedParams);
    }

    private static String crc(byte[] b) {
        CRC32 crc = new CRC32();
        crc.update(b);
        return String.format("%08x", crc.getValue());
    }

    @ParameterizedTest(name = "ZeRO-{1} over {0} ranks, L={2}, K={3}, clip {4}, {5}, decay on matrices only {6}")
    @CsvSource({
        "2, 2, 2, 1, 0, fp32, true, 0f16ce87 b214eb1d dfbd2c6f 20451dc2 5f8979c4 b214eb1d 5f8979c4, 2442bd6a 8eac14e2 9743d214 efe17569 f74421e6 8eac14e2 f74421e6",
        "2, 3, 2, 1, 0, fp32, false, 647ed3ba 4ea3b1ea 83a22db0 d034270b 87552628 4ea3b1ea 87552628, f1c83bc2 4c3dd43c 5498889a 87175916 ff79d45e 4c3dd43c ff79d45e",
        "3, 2, 2, 2, 0.5, fp32, true, 58a5ba1d 1469bee0 1131147a fc117592 6cf8f343 1469bee0 6cf8f343, 03663ab6 6f565acf f3b7294d 0a96f2ca 2cbe3e91 6f565acf 2cbe3e91",
        "3, 3, 2, 2, 0.5, fp32, true, 58a5ba1d 1469bee0 1131147a fc117592 6cf8f343 1469bee0 6cf8f343, 03663ab6 6f565acf f3b7294d 0a96f2ca 2cbe3e91 6f565acf 2cbe3e91",
        "3, 2, 1, 3, 0, bf16, false, e66c2710 4f330057 0c95eac6 e6d3a3cd 587311b9 4f330057 587311b9, 8cc6d13e 6ab79fe8 fda49a37 bd501ae0 ff3bb085 6ab79fe8 ff3bb085",
        "3, 3, 1, 2, 0.5, bf16, true, 32382b70 deb764f9 518e2eeb 035910a3 348bb6c6 deb764f9 348bb6c6, 8b64d671 36ee1d6d a44bf34d 43a0e897 ea186449 36ee1d6d ea186449",
        "2, 2, 2, 2, 1, fp16, true, a1d940c3 158f191c 79a30b46 368e7a6d bfa5a1b4 158f191c bfa5a1b4, d390d9ed 7ceeaaf3 583dea7c d46ae49c b58e6653 7ceeaaf3 b58e6653",
        "3, 3, 2, 1, 1, fp16, false, d35a747b f72ecca8 65150e60 deeb687a ab6db7b6 f72ecca8 ab6db7b6, b394537e bb358769 02542176 6c23a758 efbf7a5c bb358769 efbf7a5c"})
    void theShardedStagesKeepTheirBits(int ranks, int stage, int L, int K, float clip, String p, boolean matricesOnly,
                                       String golden512, String golden256) throws IOException {
        String golden = io.accel4j.train.WidthGoldens.pick(golden512, golden256);
        GptConfig c = new GptConfig(8, 11, 16, L, 2, 8);
        TrainConfig cfg = TrainConfig.builder().batch(2).seq(5).steps(STEPS).lr(1e-2f).eps(1e-5f).gradClip(clip)
                .weightDecay(0.1f).decayMatricesOnly(matricesOnly).dataOrder(SampleOrder.Mode.SEQUENTIAL)
                .gradAccum(K).zeroStage(stage).precision(precision(p)).build();
        String id = ranks + "-" + stage + "-" + L + "-" + K + "-" + clip + "-" + p + "-" + matricesOnly;
        Seen now = run(ranks, c, cfg, tmp.resolve(id));
        assertThat(now.resumed()).as("the resumed steps are the uninterrupted run's")
                .isEqualTo(now.steps().split(" ")[1]);
        assertThat(now.resumedParams()).as("the resumed run's parameters").isEqualTo(now.params());
        assertThat(String.join(" ", now.steps(), crc(now.model()), crc(now.state()), now.params(), now.resumed(),
                now.resumedParams())).as("steps, model file, state file, parameters, resumed steps and parameters")
                .isEqualTo(golden);
    }
}
