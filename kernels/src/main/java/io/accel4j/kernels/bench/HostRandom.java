package io.accel4j.kernels.bench;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.stream.LongStream;

/**
 * Fills host memory with uniform random floats, in parallel chunks of {@value #CHUNK} floats each seeded from
 * {@code (seed, chunk index)}: the same seed gives the same values on any number of threads.
 */
final class HostRandom {

    static final int CHUNK = 1 << 20;

    private HostRandom() {}

    /**
     * {@code n} floats uniform in [lo, hi) into {@code host}: at least 4·n bytes, written from several threads, so
     * from a shared (or global, or automatic) arena, not a confined one.
     */
    static void fill(MemorySegment host, long n, long seed, float lo, float hi) {
        if (host.byteSize() < 4 * n) {
            throw new IllegalArgumentException("host holds " + host.byteSize() + " bytes, needs 4 × " + n);
        }
        if (!host.isAccessibleBy(Thread.ofVirtual().unstarted(() -> { }))) {
            throw new IllegalArgumentException("host is confined to its thread; HostRandom writes it from several:"
                    + " allocate it from a shared arena");
        }
        long chunks = (n + CHUNK - 1) / CHUNK;
        float span = hi - lo;
        LongStream.range(0, chunks).parallel().forEach(c -> {
            SplittableRandom r = new SplittableRandom(seed ^ (0x9E3779B97F4A7C15L * (c + 1)));
            long end = Math.min(n, (c + 1) * CHUNK);
            for (long i = c * CHUNK; i < end; i++) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, lo + span * (float) r.nextDouble());
            }
        });
    }
}
