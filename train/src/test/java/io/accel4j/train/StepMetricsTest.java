package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link StepMetrics}' JSON lines read back as they were written (what a resumed run's loss curve is drawn from). */
class StepMetricsTest {

    @Test
    void linesReadBackAsWritten() {
        Random r = new Random(5);
        for (int i = 0; i < 200; i++) {
            StepMetrics m = i % 3 == 0
                    ? new StepMetrics(i, r.nextDouble() * 10, i % 2 == 0 ? r.nextDouble() : Double.NaN,
                            r.nextDouble() * 1e3, r.nextDouble() * 1e5, r.nextFloat(), r.nextDouble())
                    : new StepMetrics(i, r.nextDouble(), Double.NaN, 12.5, 1e4, 3e-4f, Double.NaN,
                            (float) Math.scalb(1.0, r.nextInt(40)), r.nextBoolean(), r.nextInt(9));
            StepMetrics back = StepMetrics.fromJson(m.toJson());
            // step_ms and tokens_per_s are written rounded (3 and 1 decimals); the rest exactly
            assertThat(back.toJson()).isEqualTo(m.toJson());
            assertThat(back.trainLoss()).isEqualTo(m.trainLoss());
            assertThat(back.lr()).isEqualTo(m.lr());
            assertThat(Float.floatToIntBits(back.lossScale())).isEqualTo(Float.floatToIntBits(m.lossScale()));
            assertThat(back.skipped()).isEqualTo(m.skipped());
        }
        StepMetrics v = StepMetrics.fromJson(StepMetrics.validationOnly(40, 1.25).toJson());
        assertThat(v.step()).isEqualTo(40);
        assertThat(v.valLoss()).isEqualTo(1.25);
        assertThat(v.trainLoss()).isNaN();
    }

    @Test
    void otherLinesAreRefusedByName() {
        assertThatThrownBy(() -> StepMetrics.fromJson("step 3")).hasMessageContaining("not a metrics line");
        assertThatThrownBy(() -> StepMetrics.fromJson("{\"train_loss\":1.0}")).hasMessageContaining("without a step");
        assertThatThrownBy(() -> StepMetrics.fromJson("{\"step\":1,\"lr\":abc}"))
                .hasMessageContaining("malformed number");
        assertThatThrownBy(() -> StepMetrics.fromJson("{\"step\":1,lr}")).hasMessageContaining("not a metrics field");
    }
}
