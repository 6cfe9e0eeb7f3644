package io.accel4j.kernels.bench;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.Event;

/**
 * {@link Measurement.Timer} on CUDA events recorded on the default stream, where {@link io.accel4j.kernels.GpuOps}
 * and the benchmarks queue their work: GPU time from the first call's start to the last call's end.
 */
final class EventTimer implements Measurement.Timer, AutoCloseable {

    private final Event start;
    private final Event end;

    EventTimer(CudaContext context) {
        start = context.createEvent(true);
        try {
            end = context.createEvent(true);
        } catch (RuntimeException e) {
            start.close();
            throw e;
        }
    }

    @Override
    public double millis(Runnable op, int times) {
        start.record(null);
        for (int i = 0; i < times; i++) {
            op.run();
        }
        end.record(null);
        end.synchronize();
        return end.elapsedMillisSince(start);
    }

    @Override
    public void close() {
        end.close();
        start.close();
    }
}
