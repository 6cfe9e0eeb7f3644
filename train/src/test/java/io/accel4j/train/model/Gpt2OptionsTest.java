package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import org.junit.jupiter.api.Test;

/** {@link Gpt2Options}: llm.c's defaults, each {@code with…} changing one choice, and what it refuses. */
class Gpt2OptionsTest {

    private static final GptConfig CONFIG = new GptConfig(8, 11, 16, 2, 2, 8);

    @Test
    void theDefaultsAreLlmcsAndEachWithChangesOneChoice() {
        Gpt2Options d = Gpt2Options.DEFAULT;
        assertThat(d).isEqualTo(new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP32, DType.FP32, DType.FP32));
        DelayedScaling recipe = DelayedScaling.defaults();
        assertThat(d.withRecompute(Recompute.every(2)))
                .isEqualTo(new Gpt2Options(Recompute.every(2), DType.FP32, null, DType.FP32, DType.FP32, DType.FP32));
        assertThat(d.withPrecision(DType.BF16, recipe))
                .isEqualTo(new Gpt2Options(Recompute.NONE, DType.BF16, recipe, DType.FP32, DType.FP32, DType.FP32));
        assertThat(d.withActivationStorage(DType.FP16))
                .isEqualTo(new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP16, DType.FP32, DType.FP32));
        assertThat(d.withGradientStorage(DType.BF16))
                .isEqualTo(new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP32, DType.BF16, DType.FP32));
        assertThat(d.withParameterStorage(DType.BF16))
                .isEqualTo(new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP32, DType.FP32, DType.BF16));
        assertThat(d).isEqualTo(new Gpt2Options(Recompute.NONE, DType.FP32, null, DType.FP32, DType.FP32, DType.FP32));
    }

    @Test
    void aModelReportsTheOptionsItWasMadeWith() {
        Gpt2Options o = Gpt2Options.DEFAULT.withRecompute(Recompute.GELU).withActivationStorage(DType.BF16)
                .withGradientStorage(DType.BF16);
        try (Parallel one = new Parallel(1); Gpt2 m = new Gpt2(CONFIG, new CpuOps(one), 2, 3, o)) {
            assertThat(m.options()).isSameAs(o);
            assertThat(m.recompute()).isSameAs(Recompute.GELU);
            assertThat(m.matmulOperands()).isEqualTo(DType.FP32);
            assertThat(m.activationStorage()).isEqualTo(DType.BF16);
            assertThat(m.gradientStorage()).isEqualTo(DType.BF16);
            assertThat(m.parameterStorage()).isEqualTo(DType.FP32);
            assertThat(m.weights()).isInstanceOf(HalfWeights.class);
        }
    }

    @Test
    void refusesWorkingWeightsOtherThanFp32OrBf16AndNullChoices() {
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withParameterStorage(DType.FP16))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the working weights are stored in fp32 or bf16, got FP16");
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withRecompute(null)).hasMessage("recompute");
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withPrecision(null, null)).hasMessage("operands");
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withActivationStorage(null)).hasMessage("storage");
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withGradientStorage(null)).hasMessage("gradients");
        assertThatThrownBy(() -> Gpt2Options.DEFAULT.withParameterStorage(null)).hasMessage("parameters");
        try (Parallel one = new Parallel(1)) {
            assertThatThrownBy(() -> new Gpt2(CONFIG, new CpuOps(one), 1, 1, null)).hasMessage("options");
        }
    }
}
