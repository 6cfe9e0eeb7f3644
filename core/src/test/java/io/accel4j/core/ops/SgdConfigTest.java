package io.accel4j.core.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class SgdConfigTest {

    @Test
    void acceptsPyTorchsSettings() {
        SgdConfig c = new SgdConfig(0.1f, 0.9f, 0f, 5e-4f, true);
        assertThat(c.withLr(0.2f)).isEqualTo(new SgdConfig(0.2f, 0.9f, 0f, 5e-4f, true));
        assertThat(c.withWeightDecay(0)).isEqualTo(new SgdConfig(0.1f, 0.9f, 0f, 0f, true));
        new SgdConfig(0f, 0f, 1f, 0f, false); // plain SGD; dampening is then unused, and any in [0, 1] is taken
    }

    @Test
    void refusesOutOfRangeValuesNamingThem() {
        assertThatThrownBy(() -> new SgdConfig(-1e-3f, 0.9f, 0f, 0f, false)).hasMessageContaining("lr");
        assertThatThrownBy(() -> new SgdConfig(Float.NaN, 0.9f, 0f, 0f, false)).hasMessageContaining("lr");
        assertThatThrownBy(() -> new SgdConfig(Float.POSITIVE_INFINITY, 0.9f, 0f, 0f, false))
                .hasMessageContaining("lr");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 1f, 0f, 0f, false)).hasMessageContaining("momentum");
        assertThatThrownBy(() -> new SgdConfig(0.1f, -0.1f, 0f, 0f, false)).hasMessageContaining("momentum");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 0.9f, 1.5f, 0f, false)).hasMessageContaining("dampening");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 0.9f, Float.NaN, 0f, false)).hasMessageContaining("dampening");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 0.9f, 0f, -1f, false)).hasMessageContaining("weightDecay");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 0f, 0f, 0f, true))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nesterov needs momentum > 0");
        assertThatThrownBy(() -> new SgdConfig(0.1f, 0.9f, 0.1f, 0f, true))
                .hasMessageContaining("dampening = 0, got momentum=0.9, dampening=0.1");
    }
}
