package io.accel4j.train.precision;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import org.junit.jupiter.api.Test;

/** The loss scaler's rules on their own: back-off, growth, the floor, the ceiling, restoring, fp32/bf16. */
class LossScalerTest {

    private static LossScaler fp16(float initial, int window) {
        return new LossScaler(new Precision(DType.FP16, initial, window));
    }

    @Test
    void anOverflowHalvesTheScaleCountsASkipAndRestartsTheWindow() {
        LossScaler s = fp16(0x1p16f, 3);
        s.afterStep(false);
        s.afterStep(false);
        assertThat(s.cleanSteps()).isEqualTo(2);
        s.afterStep(true);
        assertThat(s.scale()).isEqualTo(0x1p15f);
        assertThat(s.skippedSteps()).isEqualTo(1);
        assertThat(s.cleanSteps()).isZero();
        s.afterStep(true);
        assertThat(s.scale()).isEqualTo(0x1p14f);
        assertThat(s.skippedSteps()).isEqualTo(2);
    }

    @Test
    void windowCleanStepsDoubleTheScaleUpToTheCeiling() {
        LossScaler s = fp16(0x1p62f, 2);
        for (int i = 0; i < 7; i++) { // doubles after every second clean step, until 2^64
            assertThat(Math.getExponent(s.scale())).as("after %d clean steps", i).isEqualTo(Math.min(62 + i / 2, 64));
            s.afterStep(false);
        }
        assertThat(s.scale()).isEqualTo(LossScaler.MAX_SCALE);
        assertThat(s.skippedSteps()).isZero();
    }

    @Test
    void anOverflowAtTheSmallestScaleIsDivergence() {
        LossScaler s = fp16(2f, 5);
        s.afterStep(true);
        assertThat(s.scale()).isEqualTo(LossScaler.MIN_SCALE);
        assertThatThrownBy(() -> s.afterStep(true)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("overflow even at loss scale 1.0").hasMessageContaining("--precision bf16");
    }

    @Test
    void fp32AndBf16ScalersNeverScaleNorSkip() {
        for (DType t : new DType[] {DType.FP32, DType.BF16}) {
            LossScaler s = new LossScaler(Precision.of(t));
            assertThat(s.enabled()).isFalse();
            s.afterStep(true);
            s.afterStep(false);
            assertThat(s.scale()).isEqualTo(1f);
            assertThat(s.skippedSteps()).isZero();
            s.restore(0x1p10f, 3, 7); // an fp16 checkpoint resumed in fp32: only the skip count carries over
            assertThat(s.scale()).isEqualTo(1f);
            assertThat(s.skippedSteps()).isEqualTo(7);
        }
    }

    @Test
    void restoreTakesACheckpointsStateAndChecksIt() {
        LossScaler s = fp16(0x1p16f, 4);
        s.restore(0x1p9f, 2, 5);
        assertThat(s.scale()).isEqualTo(0x1p9f);
        assertThat(s.cleanSteps()).isEqualTo(2);
        assertThat(s.skippedSteps()).isEqualTo(5);
        s.afterStep(false);
        s.afterStep(false);
        assertThat(s.scale()).as("the window continues where it was").isEqualTo(0x1p10f);
        s.restore(0f, 0, 0); // a file without a loss scale (fp32 run, version 1)
        assertThat(s.scale()).isEqualTo(0x1p10f);
        assertThatThrownBy(() -> s.restore(3f, 0, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("loss scale 3.0 is not a power of two");
        assertThatThrownBy(() -> s.restore(0x1p4f, -1, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("clean steps -1");
    }

    @Test
    void precisionChecksItsArguments() {
        assertThatThrownBy(() -> new Precision(DType.FP8_E4M3, 1f, 1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("FP32, BF16 or FP16, got FP8_E4M3");
        for (float bad : new float[] {0f, 0.5f, 3f, 1000f, 0x1p65f, Float.NaN, Float.POSITIVE_INFINITY}) {
            assertThatThrownBy(() -> new Precision(DType.FP16, bad, 1)).as("%s", bad)
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("power of two in [1, 2^64]");
        }
        assertThatThrownBy(() -> new Precision(DType.FP16, 1024f, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("window must be >= 1 step, got 0");
        assertThat(Precision.of(DType.FP16).initialLossScale()).isEqualTo(65536f);
    }
}
