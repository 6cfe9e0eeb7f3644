package io.accel4j.kernels.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * A clock and a {@link Measurement.Timer} for tests: each timed call takes {@code callMs} (the first one
 * {@code firstMs}) of GPU time and advances the clock by that plus {@code hostMs} per sample.
 */
final class FakeClock implements LongSupplier, Measurement.Timer {

    long nanos = 1_000_000_000L;
    double firstMs;
    double callMs;
    double hostMs;
    int calls;
    final List<Integer> batches = new ArrayList<>();

    FakeClock(double firstMs, double callMs) {
        this.firstMs = firstMs;
        this.callMs = callMs;
    }

    @Override
    public long getAsLong() {
        return nanos;
    }

    void advanceMs(double ms) {
        nanos += Math.round(ms * 1e6);
    }

    @Override
    public double millis(Runnable op, int times) {
        double total = 0;
        for (int i = 0; i < times; i++) {
            op.run();
            total += calls++ == 0 ? firstMs : callMs;
        }
        batches.add(times);
        advanceMs(total + hostMs);
        return total;
    }
}
