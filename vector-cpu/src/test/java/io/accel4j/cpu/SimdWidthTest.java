package io.accel4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The width the kernels run at is the one forced by -Daccel4j.vector.bits (Surefire runs the suite at each). */
class SimdWidthTest {

    @Test
    void forcedWidthIsTheOneInUse() {
        String forced = System.getProperty(Simd.BITS_PROPERTY, "");
        switch (forced) {
            case "scalar" -> assertThat(Simd.SCALAR).isTrue();
            case "128", "256", "512" -> {
                assertThat(Simd.SCALAR).isFalse();
                assertThat(Simd.bits()).isEqualTo(Integer.parseInt(forced));
            }
            default -> assertThat(Simd.bits()).isEqualTo(Simd.preferredBits());
        }
        assertThat(Simd.describe()).isNotBlank();
    }
}
