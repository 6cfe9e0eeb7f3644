package io.accel4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

class TimingTest {

    @Test
    void withoutAWarmupTimeItRunsExactlyTheCounts() {
        AtomicInteger calls = new AtomicInteger();

        Timing t = Timing.of(2, 0, 3, calls::incrementAndGet);

        assertThat(calls).hasValue(5);
        assertThat(t.bestNanos()).isPositive().isLessThanOrEqualTo(t.medianNanos());
    }

    @Test
    void warmsUpForAtLeastTheTimeAndAtMostTenTimesIt() {
        long start = System.nanoTime();

        // a call that takes real time: an empty one could reach the cap on warm-up runs before 20 ms
        Timing.of(0, 20, 1, () -> LockSupport.parkNanos(200_000));

        long ms = (System.nanoTime() - start) / 1_000_000;
        assertThat(ms).isGreaterThanOrEqualTo(20).isLessThan(20L * Timing.WARMUP_CAP_FACTOR + 500);
    }

    @Test
    void reportsRatesFromTheBestRun() {
        assertThat(new Timing(2_000, 3_000).gflops(4_000)).isEqualTo(2.0);
        assertThat(new Timing(2_500_000, 3_000_000).bestMillis()).isEqualTo(2.5);
    }
}
