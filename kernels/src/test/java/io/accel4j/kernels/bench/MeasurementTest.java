package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class MeasurementTest {

    /** The fake timer's per-call time comes back through a division by the batch size: a few ulp. */
    private static final double EXACT = 1e-9;

    @Test
    void theFirstCallIsNotASampleAndFastCallsAreBatched() {
        FakeClock clock = new FakeClock(500, 0.01); // lazy set-up, then 10 µs a call
        Budget budget = new Budget(clock, Budget.nanos(100), Budget.nanos(1));
        AtomicInteger ran = new AtomicInteger();
        Stats s = Measurement.measure(ran::incrementAndGet, clock, budget);
        assertThat(s.medianMs()).isCloseTo(0.01, within(EXACT));
        assertThat(s.minMs()).isCloseTo(0.01, within(EXACT));
        assertThat(clock.batches.getFirst()).isEqualTo(1);
        // 2 ms a sample at 10 µs a call
        assertThat(clock.batches.getLast()).isEqualTo((int) Math.ceil(Measurement.SAMPLE_MS / 0.01));
        assertThat(ran.get()).isEqualTo(clock.calls);
    }

    @Test
    void samplesUntilTheCaseShareIsSpent() {
        FakeClock clock = new FakeClock(5, 5); // 5 ms a call: one call a sample
        Budget budget = new Budget(clock, Budget.nanos(100), Budget.nanos(0.5));
        Stats s = Measurement.measure(() -> { }, clock, budget);
        // 5 ms first call + 100 ms warm-up (20 calls), then samples of 5 ms until 500 ms: (500 − 105) / 5
        assertThat(s.samples()).isEqualTo(79);
        assertThat(s.medianMs()).isEqualTo(5);
    }

    @Test
    void slowCallsStillGetTheMinimumOfSamples() {
        FakeClock clock = new FakeClock(3000, 3000);
        Budget budget = new Budget(clock, Budget.nanos(100), Budget.nanos(1));
        Stats s = Measurement.measure(() -> { }, clock, budget);
        assertThat(s.samples()).isEqualTo(Measurement.MIN_SAMPLES);
        assertThat(clock.calls).isEqualTo(1 + Measurement.MIN_SAMPLES); // no warm-up: the share was spent
    }

    @Test
    void atMostMaxSamples() {
        FakeClock clock = new FakeClock(2, 2);
        Budget budget = new Budget(clock, Budget.nanos(1000), Budget.nanos(1000));
        assertThat(Measurement.measure(() -> { }, clock, budget).samples()).isEqualTo(Measurement.MAX_SAMPLES);
    }

    @Test
    void oneSampleOnceTheTotalIsSpent() {
        FakeClock clock = new FakeClock(3000, 3000);
        Budget budget = new Budget(clock, Budget.nanos(2), Budget.nanos(1));
        Stats s = Measurement.measure(() -> { }, clock, budget);
        assertThat(s.samples()).isEqualTo(1);
    }

    @Test
    void innerCallsCoverASampleAndAreBounded() {
        assertThat(Measurement.inner(10)).isEqualTo(1);
        assertThat(Measurement.inner(0.3)).isEqualTo(7);
        assertThat(Measurement.inner(1e-9)).isEqualTo(Measurement.MAX_INNER);
        assertThat(Measurement.inner(0)).isEqualTo(Measurement.MAX_INNER);
        assertThat(Measurement.inner(Double.NaN)).isEqualTo(Measurement.MAX_INNER);
    }
}
