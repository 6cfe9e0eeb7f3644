package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.TrainConfig;
import org.junit.jupiter.api.Test;

class LrScheduleTest {

    @Test
    void warmupCosineIsTheTrainersScheduleToTheBit() {
        TrainConfig cfg = TrainConfig.builder().steps(97).lr(3e-3f).warmup(11).minLrFraction(0.1f)
                .schedule(TrainConfig.Schedule.COSINE).build();
        LrSchedule s = LrSchedule.warmupCosine(3e-3f, 11, 97, 0.1f);
        for (int step = 0; step < 110; step++) {
            assertThat(s.lr(step)).as("step %d", step).isEqualTo(cfg.learningRate(step));
        }
    }

    @Test
    void warmupLinearAndScaling() {
        LrSchedule s = LrSchedule.warmupLinear(1f, 4, 14, 0.2f);
        assertThat(s.lr(0)).isEqualTo(0.25f);
        assertThat(s.lr(3)).isEqualTo(1f);
        assertThat(s.lr(9)).isCloseTo(0.6f, org.assertj.core.api.Assertions.within(1e-6f));
        assertThat(s.lr(14)).isCloseTo(0.2f, org.assertj.core.api.Assertions.within(1e-6f));
        assertThat(s.lr(100)).isCloseTo(0.2f, org.assertj.core.api.Assertions.within(1e-6f));
        assertThat(LrSchedule.constant(0.5f).scaled(256, 1024).lr(7)).isEqualTo(2f);
        assertThatThrownBy(() -> LrSchedule.warmupCosine(1f, -1, 5, 0f)).hasMessageContaining("warmup");
        assertThatThrownBy(() -> LrSchedule.constant(Float.NaN)).hasMessageContaining("learning rate");
    }
}
