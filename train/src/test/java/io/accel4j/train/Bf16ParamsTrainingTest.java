package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.core.DType;
import io.accel4j.fit.Learner;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A GPT-2 {@link Learner} ({@link Gpt2Learners}, the CLI's) with bf16 working weights
 * ({@link io.accel4j.fit.LearnerBuilder#parameterStorage}, {@code --bf16-params}) trains the default job's short
 * version to within a stated distance of the validation loss of the same run with fp32 working weights (both bf16
 * matmuls and saved activations), and of fp32 throughout.
 */
class Bf16ParamsTrainingTest {

    static final int STEPS = 150;
    static final int B = 8;
    static final int T = 32;

    /**
     * |val(bf16 working weights) − val(fp32 working weights)|, nats. Both runs keep an fp32 master and round what the
     * matmuls read to bf16 anyway; the difference is that the weights LayerNorm, the biases and the embeddings read
     * are bf16 too (stochastically rounded each step), a relative perturbation of at most 2⁻⁸ a weight that
     * averages out over steps. On the addition task past its unigram plateau (2.52) the curve is steep, so small
     * differences in the updates move it most; SixteenBitTrainingTest's bound for 16-bit activations, 0.1, is kept
     * (the measured distances are in the test's output and docs/PERFORMANCE.md).
     */
    private static final double VAL_TOL = 0.1;
    /** Every run must have learned at least the unigram statistics (entropy 2.52 nats) from ln 256 = 5.55. */
    private static final double LEARNED = 2.6;

    @TempDir
    static Path tmp;
    private static TokenFile train;
    private static TokenFile val;

    @BeforeAll
    static void setUp() throws IOException {
        DefaultDataset.Splits s = DefaultDataset.generate(42, 1 << 18, 1 << 14);
        TokenFile.write(tmp.resolve("train.bin"), s.train());
        TokenFile.write(tmp.resolve("val.bin"), s.val());
        train = TokenFile.open(tmp.resolve("train.bin"));
        val = TokenFile.open(tmp.resolve("val.bin"));
    }

    @AfterAll
    static void tearDown() {
        train.close();
        val.close();
    }

    /**
     * The validation loss (the val file's first {@code valBatches} batches, {@link Learner#evaluate}) after
     * {@link #STEPS} steps from llm.c's initialisation of seed 42.
     */
    static double valLoss(Precision p, DType parameters) throws IOException {
        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(STEPS).lr(5e-3f).warmup(STEPS / 10)
                .schedule(TrainConfig.Schedule.COSINE).gradClip(1f).valEvery(0).valBatches(8).seed(42)
                .precision(p).build();
        try (TokenSource data = new TokenSource(TokenShards.of(train), cfg.dataOrder(), cfg.seed(), 1);
             Learner l = Gpt2Learners.of(GptConfig.TINY, cfg).parameterStorage(parameters).threads(2).data(data)
                     .build()) {
            new LearnerLlmcCheckpoints(l, true, GptConfig.TINY, B, T, cfg.gradAccum(), data.loaders(),
                    CheckpointFiles.Retention.LATEST).start(null, 42);
            long t0 = System.nanoTime();
            l.fit(STEPS, null);
            double v;
            try (TokenSource vs = new TokenSource(TokenShards.of(val), SampleOrder.Mode.SEQUENTIAL, 0, 1)) {
                v = l.evaluate(vs.open(0, 1, B, T), cfg.valBatches());
            }
            System.out.printf("%s operands, %s gradients, %s working weights: val loss %.4f, %.1f ms/step%n",
                    p.label(), p.gradients(), parameters, v, (System.nanoTime() - t0) / 1e6 / STEPS);
            return v;
        }
    }

    @Test
    void bf16WorkingWeightsTrainLikeFp32Ones() throws IOException {
        Precision bf16 = Precision.of(DType.BF16);
        double fp32Weights = valLoss(bf16, DType.FP32);
        double store = valLoss(bf16, DType.BF16);
        double storeHalfGrads = valLoss(bf16.withGradients(DType.BF16), DType.BF16);
        double fp32 = valLoss(Precision.FP32, DType.FP32);
        assertThat(store).as("bf16 working weights against fp32 ones' %.4f", fp32Weights)
                .isCloseTo(fp32Weights, offset(VAL_TOL));
        assertThat(storeHalfGrads).as("with bf16 gradients too").isCloseTo(fp32Weights, offset(VAL_TOL));
        assertThat(store).as("against fp32 throughout, %.4f", fp32).isCloseTo(fp32, offset(VAL_TOL));
        assertThat(Math.max(Math.max(store, storeHalfGrads), Math.max(fp32, fp32Weights))).isLessThan(LEARNED);
    }
}
