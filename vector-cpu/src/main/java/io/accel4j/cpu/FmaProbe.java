package io.accel4j.cpu;

import java.util.Locale;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The fp32 FMA throughput of one core, measured rather than assumed: the "peak" every report's "of peak" column and
 * {@code accel4j doctor} divide by. A guest's {@code /proc/cpuinfo} states a nominal clock (2.1 GHz on the Zen 5
 * machines here), while the core runs faster, so pipes × lanes × 2 × that clock understates the peak by ~1.5×.
 *
 * <p>The probe runs {@value #CHAINS} independent FMA chains {@code a ← a·b + c} of {@link Simd#FLOAT}'s width, enough
 * to fill two FMA pipes of 4-cycle latency (8 in flight) with room to spare, in one method C2 compiles whole (no
 * vector crosses a call). It times short rounds until its budget is spent and keeps the best: the first rounds, run
 * before C2 has compiled the method, are 10–20× slower and never the best: the peak is the fastest the core went, not the
 * mean, which a shared machine's other guests pull down.
 *
 * <p>In scalar mode ({@code -Daccel4j.vector.bits=scalar}) it measures scalar FMAs, which is what the kernels then run.
 */
public final class FmaProbe {

    /** Independent accumulators: 12 zmm/ymm registers, 3 per cycle of FMA latency on two pipes. */
    static final int CHAINS = 12;
    /** Time of the timed rounds, after the round has been compiled. */
    static final long BUDGET_MS = 100;
    /** The longest {@link #measure()} waits for the JIT to compile the round. */
    static final long COMPILE_WAIT_MS = 5_000;
    /** Iterations of the short calls that get the round compiled. */
    private static final int WARM_ITERATIONS = 64;
    private static final VectorSpecies<Float> S = Simd.FLOAT;
    /** FMAs per chain per timed round: ~30 µs at 200 GFLOP/s with 16 lanes, short enough to miss most interrupts. */
    private static final int ROUND = 1 << 14;
    @SuppressWarnings("unused")
    private static volatile float SINK;

    private static volatile Result cached;

    private FmaProbe() {}

    /**
     * The measured peak.
     *
     * @param gflops fp32 GFLOP/s of one core (an FMA counts 2 flops)
     * @param lanes  floats per vector (1 in scalar mode)
     * @param bits   the vector width in bits
     * @param rounds   timed rounds kept the best of
     * @param compiled whether the round ran at compiled speed before the timed rounds (false: the JIT did not
     *                 compile it within {@value #COMPILE_WAIT_MS} ms, and the figure is too low)
     */
    public record Result(double gflops, int lanes, int bits, int rounds, boolean compiled) {

        /** {@code 231.4 GFLOP/s per core (measured: fp32 FMA, 512-bit, 16 lanes)}. */
        public String describe() {
            return String.format(Locale.ROOT, "%.1f GFLOP/s per core (measured: fp32 FMA, %d-bit, %d lane%s%s)",
                    gflops, bits, lanes, lanes == 1 ? "" : "s", compiled ? "" : "; NOT compiled in time: too low");
        }

        /** This many GFLOP/s as a fraction of {@code threads} cores' peak. */
        public double fraction(double achievedGflops, int threads) {
            return achievedGflops / (gflops * threads);
        }
    }

    /** The peak, measured once per JVM (the first call takes 0.1–1 s: the JIT's compile, then the timed rounds). */
    public static Result peak() {
        Result r = cached;
        if (r == null) {
            synchronized (FmaProbe.class) {
                r = cached;
                if (r == null) {
                    r = measure();
                    cached = r;
                }
            }
        }
        return r;
    }

    /**
     * Measures afresh. First short calls ({@value #WARM_ITERATIONS} iterations) until one runs at compiled speed,
     * at most {@value #COMPILE_WAIT_MS} ms: the JIT compiles the round with C2 after some hundreds of calls, in the
     * background, which takes from tens of milliseconds on an idle machine to a second on a loaded one (interpreted,
     * the Vector API allocates per operation and runs ~1000× slower). Then rounds of {@link #ROUND} iterations, each
     * timed, for {@value #BUDGET_MS} ms, the best kept.
     */
    static Result measure() {
        long start = System.nanoTime();
        float sink = 0;
        boolean compiled = false;
        // compiled, 64 iterations of 12 FMAs take well under a microsecond; interpreted, about a millisecond
        while (!compiled && System.nanoTime() - start < COMPILE_WAIT_MS * 1_000_000L) {
            long t0 = System.nanoTime();
            sink += Simd.SCALAR ? scalarRound(WARM_ITERATIONS, 1f) : vectorRound(WARM_ITERATIONS, 1f);
            compiled = System.nanoTime() - t0 < 5_000;
        }
        long deadline = System.nanoTime() + BUDGET_MS * 1_000_000L;
        double best = 0;
        int rounds = 0;
        do {
            float b = 1f + (rounds & 7) * 1e-7f;
            long t0 = System.nanoTime();
            sink += Simd.SCALAR ? scalarRound(ROUND, b) : vectorRound(ROUND, b);
            long ns = System.nanoTime() - t0;
            best = Math.max(best, 2.0 * CHAINS * ROUND * Simd.lanes() / Math.max(ns, 1));
            rounds++;
        } while (System.nanoTime() < deadline);
        SINK = sink; // keeps the rounds' results alive
        return new Result(best, Simd.lanes(), Simd.bits(), rounds, compiled);
    }

    /** {@code n} FMAs on each of {@value #CHAINS} vector chains; returns a lane sum so nothing is dead code. */
    private static float vectorRound(int n, float b) {
        FloatVector vb = FloatVector.broadcast(S, b);
        FloatVector vc = FloatVector.broadcast(S, 1e-7f);
        FloatVector a0 = FloatVector.broadcast(S, 0.1f), a1 = FloatVector.broadcast(S, 0.2f);
        FloatVector a2 = FloatVector.broadcast(S, 0.3f), a3 = FloatVector.broadcast(S, 0.4f);
        FloatVector a4 = FloatVector.broadcast(S, 0.5f), a5 = FloatVector.broadcast(S, 0.6f);
        FloatVector a6 = FloatVector.broadcast(S, 0.7f), a7 = FloatVector.broadcast(S, 0.8f);
        FloatVector a8 = FloatVector.broadcast(S, 0.9f), a9 = FloatVector.broadcast(S, 1.0f);
        FloatVector a10 = FloatVector.broadcast(S, 1.1f), a11 = FloatVector.broadcast(S, 1.2f);
        for (int i = 0; i < n; i++) {
            a0 = a0.fma(vb, vc); a1 = a1.fma(vb, vc); a2 = a2.fma(vb, vc); a3 = a3.fma(vb, vc);
            a4 = a4.fma(vb, vc); a5 = a5.fma(vb, vc); a6 = a6.fma(vb, vc); a7 = a7.fma(vb, vc);
            a8 = a8.fma(vb, vc); a9 = a9.fma(vb, vc); a10 = a10.fma(vb, vc); a11 = a11.fma(vb, vc);
        }
        FloatVector s = a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7).add(a8).add(a9).add(a10).add(a11);
        return s.reduceLanes(VectorOperators.ADD); // a probe's sink: its order does not matter
    }

    /** The scalar form of {@link #vectorRound}. */
    private static float scalarRound(int n, float b) {
        float c = 1e-7f;
        float a0 = 0.1f, a1 = 0.2f, a2 = 0.3f, a3 = 0.4f, a4 = 0.5f, a5 = 0.6f;
        float a6 = 0.7f, a7 = 0.8f, a8 = 0.9f, a9 = 1.0f, a10 = 1.1f, a11 = 1.2f;
        for (int i = 0; i < n; i++) {
            a0 = Math.fma(a0, b, c); a1 = Math.fma(a1, b, c); a2 = Math.fma(a2, b, c); a3 = Math.fma(a3, b, c);
            a4 = Math.fma(a4, b, c); a5 = Math.fma(a5, b, c); a6 = Math.fma(a6, b, c); a7 = Math.fma(a7, b, c);
            a8 = Math.fma(a8, b, c); a9 = Math.fma(a9, b, c); a10 = Math.fma(a10, b, c); a11 = Math.fma(a11, b, c);
        }
        return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    }
}
