package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class HostRandomTest {

    @Test
    void fillsEveryElementInRangeAndTheSameSeedGivesTheSameValues() {
        long n = 2L * HostRandom.CHUNK + 12_345; // two whole chunks and a tail
        try (Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(4 * n + 4);
            MemorySegment b = arena.allocate(4 * n);
            MemorySegment c = arena.allocate(4 * n);
            a.fill((byte) 0xff); // NaN everywhere: an element left unwritten fails the range check
            HostRandom.fill(a, n, 42, -0.5f, 2f);
            HostRandom.fill(b, n, 42, -0.5f, 2f);
            HostRandom.fill(c, n, 43, -0.5f, 2f);
            int differ = 0;
            double sum = 0;
            for (long i = 0; i < n; i++) {
                float x = a.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                assertThat(x).as("element %d", i).isGreaterThanOrEqualTo(-0.5f).isLessThan(2f);
                assertThat(b.getAtIndex(ValueLayout.JAVA_FLOAT, i)).isEqualTo(x);
                differ += c.getAtIndex(ValueLayout.JAVA_FLOAT, i) != x ? 1 : 0;
                sum += x;
            }
            assertThat(a.getAtIndex(ValueLayout.JAVA_INT, n)).as("past n untouched").isEqualTo(-1);
            assertThat(differ).isGreaterThan((int) (0.99 * n));
            // uniform mean 0.75, standard error 2.5/√(12n) ≈ 4e-4: 0.01 is > 20 standard errors
            assertThat(sum / n).isBetween(0.74, 0.76);
        }
    }

    @Test
    void refusesASegmentTooSmallOrConfinedToOneThread() {
        try (Arena shared = Arena.ofShared(); Arena confined = Arena.ofConfined()) {
            assertThatThrownBy(() -> HostRandom.fill(shared.allocate(8), 3, 1, 0, 1))
                    .hasMessage("host holds 8 bytes, needs 4 × 3");
            assertThatThrownBy(() -> HostRandom.fill(confined.allocate(4L * HostRandom.CHUNK * 3), 3L
                    * HostRandom.CHUNK, 1, 0, 1)).hasMessageContaining("allocate it from a shared arena");
        }
    }
}
