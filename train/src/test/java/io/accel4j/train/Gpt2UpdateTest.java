package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.io.IOException;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The update rule: learning-rate schedule, the no-decay set, clipping folded into AdamW's gradient scale (the GPT-2
 * learner {@code accel4j train} builds, {@link Gpt2Fixtures}).
 */
class Gpt2UpdateTest {

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("t.bin"), 200, new Random(3));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    @Test
    void cosineScheduleWarmsUpThenDecaysToTheFloor() {
        TrainConfig c = TrainConfig.builder().steps(12).lr(1f).warmup(2).minLrFraction(0.1f)
                .schedule(TrainConfig.Schedule.COSINE).build();
        assertThat(c.learningRate(0)).isEqualTo(0.5f);
        assertThat(c.learningRate(1)).isEqualTo(1f);
        assertThat(c.learningRate(2)).isEqualTo(1f);
        assertThat(c.learningRate(7)).isCloseTo(0.55f, offset(1e-6f)); // halfway: (1 + 0.1) / 2
        assertThat(c.learningRate(11)).isCloseTo(0.1f + 0.9f * 0.5f * (1 + (float) Math.cos(Math.PI * 0.9)),
                offset(1e-6f));
        TrainConfig constant = c.toBuilder().schedule(TrainConfig.Schedule.CONSTANT).build();
        assertThat(constant.learningRate(0)).isEqualTo(0.5f);
        assertThat(constant.learningRate(11)).isEqualTo(1f);
    }

    @Test
    void badSettingsNameTheSetting() {
        assertThatThrownBy(() -> TrainConfig.builder().gradAccum(0).build())
                .hasMessage("gradAccum must be >= 1, got 0");
        assertThatThrownBy(() -> TrainConfig.builder().lr(-1).build()).hasMessageContaining("lr must be");
        assertThatThrownBy(() -> TrainConfig.builder().minLrFraction(2).build())
                .hasMessageContaining("minLrFraction");
    }

    /** Parameters after one step of {@code cfg} from init seed 1, and the gradients it used. */
    private static float[][] oneStep(TrainConfig cfg) {
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(cfg, trainFile, null, 1)) {
            float[] before = t.parameters();
            StepMetrics s = t.trainStep();
            return new float[][] {before, t.parameters(), Gpt2Fixtures.floats(t.learner().network().grads()),
                {(float) s.gradNorm()}};
        }
    }

    @Test
    void theNoDecaySetSparesBiasesAndLayerNorms() {
        TrainConfig plain = Gpt2Fixtures.base().lr(0.1f).build();
        float[][] none = oneStep(plain);
        float[][] matrices = oneStep(plain.toBuilder().weightDecay(0.5f).decayMatricesOnly(true).build());
        float[][] all = oneStep(plain.toBuilder().weightDecay(0.5f).build());
        Set<Param> decayed = EnumSet.of(Param.WTE, Param.WPE, Param.QKVW, Param.ATTPROJW, Param.FCW, Param.FCPROJW);
        ParameterLayout layout = new ParameterLayout(Gpt2Fixtures.TINY);
        for (ParameterLayout.Span t : layout.tensors()) {
            for (long i = 0; i < t.count(); i++) {
                int k = (int) (t.offset() + i);
                float p0 = none[0][k];
                float decay = 0.1f * 0.5f * p0; // p −= lr·wd·p, beside the Adam step
                assertThat(all[1][k]).as("%s[%d], decay everything", t.param().fileName(), i)
                        .isCloseTo(none[1][k] - decay, offset(1e-6f));
                float expected = decayed.contains(t.param()) ? none[1][k] - decay : none[1][k];
                assertThat(matrices[1][k]).as("%s[%d], matrices only", t.param().fileName(), i)
                        .isCloseTo(expected, offset(1e-6f));
            }
        }
    }

    @Test
    void clippingScalesTheGradientAdamWSees() {
        // a large eps makes the first AdamW step depend on the gradient's size, not just its sign:
        // Δp = −lr·g·s/(|g|·s + eps) with s the clip factor (m̂ = g·s, √v̂ = |g|·s at step 1)
        float lr = 0.1f, eps = 0.01f;
        TrainConfig free = Gpt2Fixtures.base().lr(lr).eps(eps).build();
        float[][] unclipped = oneStep(free);
        float norm = unclipped[3][0];
        float clip = norm / 4;
        float[][] clipped = oneStep(free.toBuilder().gradClip(clip).build());
        assertThat(clipped[3][0]).as("the reported norm is the one before clipping").isEqualTo(norm);
        float[][] loose = oneStep(free.toBuilder().gradClip(norm * 2).build());
        assertThat(loose[1]).as("a clip above the norm changes nothing").containsExactly(unclipped[1]);
        double s = clip / norm;
        for (int k = 0; k < clipped[0].length; k++) {
            double g = clipped[2][k];
            double expected = clipped[0][k] - lr * g * s / (Math.abs(g) * s + eps);
            assertThat((double) clipped[1][k]).as("param %d", k).isCloseTo(expected, offset(1e-6));
        }
    }
}
