package io.accel4j.core.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class AdamWRangeTest {

    @Test
    void checkReturnsTheElementsTheBuffersMustHold() {
        assertThat(AdamWRange.check(List.of())).isZero();
        assertThat(AdamWRange.check(List.of(new AdamWRange(0, 7, 5, true), new AdamWRange(5, 0, 0, false),
                new AdamWRange(9, 100, 4, false)))).isEqualTo(13);
    }

    @Test
    void overlappingOrUnorderedRangesAreRefusedNamingBoth() {
        assertThatThrownBy(() -> AdamWRange.check(List.of(new AdamWRange(0, 0, 10, true),
                new AdamWRange(9, 9, 2, true))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("ranges[1] AdamWRange[start=9").hasMessageContaining("ranges[0]")
                .hasMessageContaining("must not overlap");
        assertThatThrownBy(() -> AdamWRange.check(List.of(new AdamWRange(5, 0, 1, true),
                new AdamWRange(0, 0, 1, true)))).hasMessageContaining("in order");
    }

    @Test
    void negativeFieldsAreRefused() {
        assertThatThrownBy(() -> new AdamWRange(0, -1, 3, true)).hasMessageContaining("offset=-1");
    }

    @Test
    void withWeightDecayKeepsTheRest() {
        AdamWConfig c = new AdamWConfig(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f);
        assertThat(c.withWeightDecay(0f)).isEqualTo(new AdamWConfig(1e-3f, 0.9f, 0.95f, 1e-8f, 0f));
    }
}
