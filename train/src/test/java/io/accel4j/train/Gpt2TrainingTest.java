package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPT-2 learner's training loop as {@code accel4j train} drives it ({@link Gpt2Fixtures.Run}): accumulation ≡ a
 * bigger batch, resume ≡ an uninterrupted run (validation included), the latest checkpoint kept, a checkpoint of
 * another run a clear error.
 */
class Gpt2TrainingTest {

    /**
     * Accumulated vs big-batch gradients, relative to each tensor's largest: the same sums grouped differently
     * (K partial sums of B·T rows vs one of K·B·T), each fp32 with a few ulps of error: ~1e-6; 2e-5 for margin.
     */
    private static final double ACCUM_REL = 2e-5;

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void setUp() throws IOException {
        Random r = new Random(7);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, r);
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 100, r);
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
    }

    private static TrainConfig.Builder base() {
        return Gpt2Fixtures.base();
    }

    /**
     * K micro-batches of B against one batch of K·B: with the learning rate 0 (the parameters stay), 3 steps' losses
     * and gradients within {@link #ACCUM_REL}; then whole steps, updates included, stay together.
     */
    @Test
    void gradientAccumulationIsABiggerBatch() {
        int K = 3;
        UnaryOperator<LearnerBuilder> still = b -> Gpt2Fixtures.FP32_ACTIVATIONS.apply(b).schedule(s -> 0f);
        try (Gpt2Fixtures.Run acc = new Gpt2Fixtures.Run(base().gradAccum(K).build(), Gpt2Fixtures.TINY, trainFile,
                null, 1, 1, still);
             Gpt2Fixtures.Run one = new Gpt2Fixtures.Run(base().batch(2 * K).build(), Gpt2Fixtures.TINY, trainFile,
                     null, 1, 1, still)) {
            for (int s = 0; s < 3; s++) {
                double lossAcc = acc.trainStep().trainLoss();
                double lossOne = one.trainStep().trainLoss();
                assertThat(lossAcc).as("loss of step %d", s).isCloseTo(lossOne, offset(1e-5 * lossOne));
                float[] ga = Gpt2Fixtures.floats(acc.learner().network().grads());
                float[] gb = Gpt2Fixtures.floats(one.learner().network().grads());
                for (ParameterLayout.Span t : new ParameterLayout(Gpt2Fixtures.TINY).tensors()) {
                    double scale = 0;
                    for (long i = 0; i < t.count(); i++) {
                        scale = Math.max(scale, Math.abs(gb[(int) (t.offset() + i)]));
                    }
                    for (long i = 0; i < t.count(); i++) {
                        int k = (int) (t.offset() + i);
                        assertThat(ga[k]).as("step %d grad %s[%d]", s, t.param().fileName(), i)
                                .isCloseTo(gb[k], offset((float) (ACCUM_REL * scale + 1e-12)));
                    }
                }
            }
            assertThat(acc.parameters()).as("a learning rate of 0 leaves the parameters")
                    .containsExactly(one.parameters());
        }
        // and whole steps, updates included, stay together
        try (Gpt2Fixtures.Run acc = new Gpt2Fixtures.Run(base().gradAccum(K).build(), trainFile, null, 1);
             Gpt2Fixtures.Run one = new Gpt2Fixtures.Run(base().batch(2 * K).build(), trainFile, null, 1)) {
            for (int s = 0; s < 4; s++) {
                StepMetrics a = acc.trainStep(), b = one.trainStep();
                assertThat(a.trainLoss()).as("loss of step %d", s).isCloseTo(b.trainLoss(), offset(1e-4));
                assertThat(a.gradNorm()).isCloseTo(b.gradNorm(), offset(1e-4 * b.gradNorm()));
            }
        }
    }

    private static TrainConfig everything() {
        return TrainConfig.builder().batch(2).seq(5).steps(7).lr(3e-2f).schedule(TrainConfig.Schedule.COSINE)
                .warmup(2).minLrFraction(0.1f).weightDecay(0.1f).decayMatricesOnly(true).gradClip(0.5f)
                .gradAccum(2).valEvery(2).valBatches(3).dataOrder(SampleOrder.Mode.SHUFFLED).seed(5).build();
    }

    @Test
    void resumeGivesBitIdenticalLosses() throws IOException {
        TrainConfig cfg = everything();
        List<StepMetrics> straight;
        float[] finalParams;
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, valFile, 3)) {
            straight = t.toEnd();
            finalParams = t.parameters();
        }
        Path dir = tmp.resolve("resume");
        List<StepMetrics> resumed = new ArrayList<>();
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, valFile, 3)) {
            for (int s = 0; s < 3; s++) {
                resumed.add(t.trainStep());
            }
            t.save(dir);
            t.trainStep(); // a step the resumed run must not see
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, valFile, 99)) { // other init: overwritten
            assertThat(t.resume(dir)).isEqualTo(3);
            assertThat(t.step()).isEqualTo(3);
            resumed.addAll(t.toEnd());
            assertThat(t.parameters()).containsExactly(finalParams);
        }
        assertThat(resumed).hasSameSizeAs(straight);
        for (int i = 0; i < straight.size(); i++) {
            StepMetrics a = straight.get(i), b = resumed.get(i);
            assertThat(b.step()).isEqualTo(a.step());
            assertThat(bits(b.trainLoss())).as("train loss of step %d", i).isEqualTo(bits(a.trainLoss()));
            assertThat(bits(b.valLoss())).as("val loss of step %d", i).isEqualTo(bits(a.valLoss()));
            assertThat(bits(b.gradNorm())).as("grad norm of step %d", i).isEqualTo(bits(a.gradNorm()));
            assertThat(b.lr()).isEqualTo(a.lr());
        }
        assertThat(straight.get(0).valLoss()).isFinite();
        assertThat(straight.get(1).valLoss()).isNaN();
        // the run learned something (the data is mostly t+1)
        assertThat(straight.get(6).valLoss()).isLessThan(straight.get(0).valLoss());
    }

    private static long bits(double x) {
        return Double.doubleToRawLongBits(x);
    }

    @Test
    void saveKeepsOnlyTheLatestCheckpoint() throws IOException {
        Path dir = tmp.resolve("latest");
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), trainFile, null, 3)) {
            t.trainStep();
            t.save(dir);
            t.trainStep();
            Path model = t.save(dir);
            assertThat(model.getFileName().toString()).isEqualTo("model_00000002.bin");
        }
        try (var files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList())
                    .containsExactly(CheckpointFiles.POINTER, "model_00000002.bin", "state_00000002.bin");
        }
    }

    @Test
    void aCheckpointOfAnotherRunIsAClearError() throws IOException {
        Path dir = tmp.resolve("other");
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), trainFile, null, 3)) {
            t.trainStep();
            t.save(dir);
        }
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().seq(4).build(), trainFile, null, 3)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("state_00000001.bin").hasMessageContaining("B, T, grad accumulation");
        }
        GptConfig wider = new GptConfig(8, 11, 16, 2, 2, 12);
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), wider, trainFile, null, 3, 1, b -> b)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[10] (C) is 8, but the model has 12");
        }
        Path state = dir.resolve("state_00000001.bin");
        byte[] bytes = Files.readAllBytes(state);
        Files.write(state, java.util.Arrays.copyOf(bytes, bytes.length - 3));
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(base().build(), trainFile, null, 3)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("size is " + (bytes.length - 3) + " bytes");
            assertThatThrownBy(() -> t.resume(tmp.resolve("nowhere")))
                    .hasMessageContaining("no checkpoint in");
        }
    }
}
