package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class StatsTest {

    @Test
    void medianOfAnOddCountIsTheMiddleAndMinTheSmallest() {
        double[] ms = {5, 1.5, 9, 2, 3};
        Stats s = Stats.of(ms);
        assertThat(s.medianMs()).isEqualTo(3);
        assertThat(s.minMs()).isEqualTo(1.5);
        assertThat(s.samples()).isEqualTo(5);
        assertThat(ms).containsExactly(5, 1.5, 9, 2, 3); // not sorted in place
    }

    @Test
    void medianOfAnEvenCountIsTheMeanOfTheTwoMiddle() {
        assertThat(Stats.of(new double[] {4, 1, 3, 100}).medianMs()).isEqualTo(3.5);
        assertThat(Stats.of(new double[] {2}).medianMs()).isEqualTo(2);
    }

    @Test
    void medianIgnoresOutliersOnRandomSamples() {
        long seed = new SplittableRandom().nextLong();
        SplittableRandom r = new SplittableRandom(seed);
        int n = 3 + 2 * r.nextInt(49); // odd, ≥ 3: with one sample the outlier would be the median
        double[] ms = new double[n];
        for (int i = 0; i < n; i++) {
            ms[i] = 1 + i * 0.001;
        }
        for (int i = n - 1; i > 0; i--) { // shuffle
            int j = r.nextInt(i + 1);
            double t = ms[i];
            ms[i] = ms[j];
            ms[j] = t;
        }
        ms[r.nextInt(n)] += 1000; // one outlier can only move the median by one rank
        Stats s = Stats.of(ms);
        assertThat(s.medianMs()).as("seed %d", seed).isBetween(1 + (n / 2) * 0.001 - 1e-12, 1 + (n / 2 + 1) * 0.001);
        assertThat(s.minMs()).as("seed %d", seed).isLessThanOrEqualTo(1.001);
    }

    @Test
    void rejectsNoSamplesAndTimesThatAreNotPositive() {
        assertThatThrownBy(() -> Stats.of(new double[0])).hasMessage("no samples");
        assertThatThrownBy(() -> Stats.of(new double[] {1, 0})).hasMessageContaining("finite and > 0");
        assertThatThrownBy(() -> Stats.of(new double[] {1, Double.NaN})).hasMessageContaining("finite and > 0");
        assertThatThrownBy(() -> Stats.of(new double[] {1, Double.POSITIVE_INFINITY}))
                .hasMessageContaining("finite and > 0");
    }
}
