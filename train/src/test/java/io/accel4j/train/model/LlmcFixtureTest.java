package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.ref.AdamWRef;
import io.accel4j.fit.Learner;
import io.accel4j.train.Gpt2Fixtures;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A tiny llm.c-format checkpoint and token file, written by the test, trained on for a few steps by the GPT-2
 * learner {@code accel4j train} builds ({@link Gpt2Fixtures#builder}, started from the file by
 * {@link LearnerLlmcCheckpoints#start}); the float64 model ({@link Gpt2Ref} plus {@link AdamWRef}) computes the expected losses of every
 * step from the same files' contents.
 */
class LlmcFixtureTest {

    private static final GptConfig C = Gpt2Test.TINY;
    private static final int B = 2, T = 5, STEPS = 3;
    /** First step: the fast forward against float64, as in {@link Gpt2Test} (a few fp32 ulps on a loss of ~3). */
    private static final double FIRST_TOL = 1e-5;
    /**
     * Later steps: also the parameters differ by the fp32 gradients' error through AdamW (≈ lr·1e-5 relative per
     * element, more where a gradient is near 0 and its sign uncertain, but those barely move the loss).
     */
    private static final double LATER_TOL = 1e-4;

    @TempDir
    Path dir;

    @Test
    void expectedLossesOfTheFirstStepsFromAFloat64Model() throws IOException {
        Random r = new Random(11);
        float[] p = Gpt2Test.randomParams(C, 11);
        int[] tokens = new int[STEPS * B * T + 1];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(C.V());
        }
        Path modelFile = dir.resolve("tiny.bin"), tokenFile = dir.resolve("tokens.bin");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment seg = a.allocate((long) p.length * 4);
            MemorySegment.copy(p, 0, seg, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, p.length);
            LlmcCheckpoint.write(modelFile, C, seg, LlmcCheckpoint.VERSION_FP32);
        }
        TokenFile.write(tokenFile, tokens);

        TrainConfig cfg = TrainConfig.builder().batch(B).seq(T).steps(STEPS).lr(1e-2f).weightDecay(0.05f)
                .dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
        double[] actual = new double[STEPS];
        try (Arena a = Arena.ofConfined()) {
            assertThat(LlmcCheckpoint.read(modelFile, a).config()).isEqualTo(C);
        }
        try (TokenFile train = TokenFile.open(tokenFile);
             TokenSource data = new TokenSource(TokenShards.of(train), cfg.dataOrder(), cfg.seed(), 1);
             Learner learner = Gpt2Fixtures.builder(cfg, C, 1, data).build()) {
            new LearnerLlmcCheckpoints(learner, true, C, B, T, 1, data.loaders(), CheckpointFiles.Retention.LATEST)
                    .start(modelFile, 0);
            List<StepMetrics> steps = learner.fit(STEPS, null);
            for (int s = 0; s < STEPS; s++) {
                actual[s] = steps.get(s).trainLoss();
            }
        }

        Gpt2Ref ref = new Gpt2Ref(C);
        double[] params = Gpt2Test.widen(p);
        double[] m = new double[params.length], v = new double[params.length];
        AdamWConfig adamw = new AdamWConfig(cfg.lr(), cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay());
        for (int s = 0; s < STEPS; s++) {
            int[] inp = Arrays.copyOfRange(tokens, s * B * T, (s + 1) * B * T);
            int[] tgt = Arrays.copyOfRange(tokens, s * B * T + 1, (s + 1) * B * T + 1);
            Gpt2Ref.Result res = ref.lossAndGrads(params, inp, tgt, B, T);
            double tol = s == 0 ? FIRST_TOL : LATER_TOL;
            assertThat(actual[s]).as("loss of step %d", s).isCloseTo(res.loss(), offset(tol * res.loss()));
            AdamWRef.update(params, res.grads(), m, v, adamw, s + 1, 1.0);
        }
        assertThat(actual[STEPS - 1]).isNotEqualTo(actual[0]);
    }
}
