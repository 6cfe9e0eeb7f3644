package io.accel4j.core;

import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.fail;

/**
 * Runs a check over every float bit pattern. The body gets chunks of the 2^31 patterns with a clear sign bit and checks
 * each pattern and its negation ({@code p | 0x8000_0000}) itself, so all 2^32 patterns are covered while the
 * reference value is computed once per magnitude. Chunks go to a parallel stream; the body's loop is a plain counted
 * loop with no boxing, and only failures allocate.
 */
final class Exhaustive {

    /** Patterns per chunk: 2^31 / 2^20 = 2048 chunks, plenty to balance two or more cores. */
    private static final int CHUNK = 1 << 20;
    /** Failures described in the assertion message; the rest are only counted. */
    private static final int REPORTED = 20;

    /** Checks the patterns {@code from … from+count−1} (all with a clear sign bit) and their negations. */
    @FunctionalInterface
    interface Body {
        void run(int from, int count, Failures failures);
    }

    /** Collects failures from all threads. */
    static final class Failures {
        private final AtomicLong count = new AtomicLong();
        private final ConcurrentLinkedQueue<String> first = new ConcurrentLinkedQueue<>();

        /** Records a mismatch: the input bits, what the reference expects and what the implementation gave. */
        void add(String what, int inputBits, String expected, String actual) {
            if (count.incrementAndGet() <= REPORTED) {
                first.add(String.format(Locale.ROOT, "%s: x=0x%08x (%s): expected %s, got %s",
                        what, inputBits, Float.intBitsToFloat(inputBits), expected, actual));
            }
        }
    }

    private Exhaustive() {}

    /** Runs {@code body} over all 2^32 float bit patterns, prints the time taken, fails listing the first misses. */
    static void allFloats(String what, Body body) {
        Failures failures = new Failures();
        long t0 = System.nanoTime();
        IntStream.range(0, (int) ((1L << 31) / CHUNK)).parallel()
                .forEach(c -> body.run(c * CHUNK, CHUNK, failures));
        double seconds = (System.nanoTime() - t0) / 1e9;
        System.out.printf(Locale.ROOT, "exhaustive %s: 2^32 float patterns in %.1f s on %d cores%n",
                what, seconds, Runtime.getRuntime().availableProcessors());
        long n = failures.count.get();
        if (n > 0) {
            fail(what + ": " + n + " of 2^32 float patterns wrong; the first ones:\n  "
                    + String.join("\n  ", failures.first));
        }
    }

    /** A code and the value the reference decodes it to, for messages: {@code 0x7e (448.0)}. */
    static String code(int code, int hexDigits, double value) {
        return String.format(Locale.ROOT, "0x%0" + hexDigits + "x (%s)", code, value);
    }
}
