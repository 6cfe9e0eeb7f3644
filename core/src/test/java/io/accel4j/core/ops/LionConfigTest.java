package io.accel4j.core.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class LionConfigTest {

    @Test
    void acceptsThePapersSettings() {
        LionConfig c = new LionConfig(1e-4f, 0.9f, 0.99f, 1f);
        assertThat(c.withLr(3e-4f)).isEqualTo(new LionConfig(3e-4f, 0.9f, 0.99f, 1f));
        assertThat(c.withWeightDecay(0)).isEqualTo(new LionConfig(1e-4f, 0.9f, 0.99f, 0f));
        assertThat(c.decayFactor()).isEqualTo((float) (1 - (double) 1e-4f));
        assertThat(c.withWeightDecay(0).decayFactor()).isEqualTo(1f);
    }

    @Test
    void refusesOutOfRangeValuesNamingThem() {
        assertThatThrownBy(() -> new LionConfig(-1e-4f, 0.9f, 0.99f, 0f)).hasMessageContaining("lr");
        assertThatThrownBy(() -> new LionConfig(Float.NaN, 0.9f, 0.99f, 0f)).hasMessageContaining("lr");
        assertThatThrownBy(() -> new LionConfig(1e-4f, 1f, 0.99f, 0f)).hasMessageContaining("beta1");
        assertThatThrownBy(() -> new LionConfig(1e-4f, 0.9f, -0.5f, 0f)).hasMessageContaining("beta2");
        assertThatThrownBy(() -> new LionConfig(1e-4f, 0.9f, 0.99f, Float.POSITIVE_INFINITY))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weightDecay");
    }
}
