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
    /** FMAs per chain per loop iteration (the body written out, see {@link #vectorRound}). */
    static final int UNROLL = 4;
    /** Time of the timed rounds, after the round has been compiled. */
    static final long BUDGET_MS = 100;
    /** The longest {@link #measure()} waits for the JIT to compile the round. */
    static final long COMPILE_WAIT_MS = 5_000;
    /** Iterations of the short calls that get the round compiled. */
    private static final int WARM_ITERATIONS = 16;
    private static final VectorSpecies<Float> S = Simd.FLOAT;
    /** Iterations per timed round ({@value #UNROLL} FMAs a chain each): ~30 µs at 200 GFLOP/s with 16 lanes, short enough to miss most interrupts. */
    private static final int ROUND = 1 << 12;
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
        // compiled, 16 iterations of 48 FMAs take well under a microsecond; interpreted, about a millisecond
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
            best = Math.max(best, 2.0 * CHAINS * UNROLL * ROUND * Simd.lanes() / Math.max(ns, 1));
            rounds++;
        } while (System.nanoTime() < deadline);
        SINK = sink; // keeps the rounds' results alive
        return new Result(best, Simd.lanes(), Simd.bits(), rounds, compiled);
    }

    /**
     * {@code n} iterations of {@value #UNROLL} FMAs on each of {@value #CHAINS} vector chains {@code a ← x·y + a}; returns
     * a lane sum so nothing is dead code.
     *
     * <p>Two shapes matter here, both seen on Zen 3 (AVX2). The chain runs through the addend, as a GEMM's accumulator
     * does: {@code a ← a·b + c} (the chain through a factor) runs at ~0.8× on that core. And the loop body is
     * unrolled {@value #UNROLL}× so that the method's bytecode exceeds C2's {@code FreqInlineSize} (325 bytes):
     * inlined into {@link #measure}'s loop, once that loop is compiled on stack replacement, the round ran at half
     * speed (46 GFLOP/s against 101 on that core); a method too big to inline is always called, compiled on its own.
     * {@code FmaProbeTest} checks the size.
     */
    private static float vectorRound(int n, float b) {
        FloatVector x = FloatVector.broadcast(S, b);
        FloatVector y = FloatVector.broadcast(S, 1e-7f);
        FloatVector a0 = FloatVector.broadcast(S, 0.1f), a1 = FloatVector.broadcast(S, 0.2f);
        FloatVector a2 = FloatVector.broadcast(S, 0.3f), a3 = FloatVector.broadcast(S, 0.4f);
        FloatVector a4 = FloatVector.broadcast(S, 0.5f), a5 = FloatVector.broadcast(S, 0.6f);
        FloatVector a6 = FloatVector.broadcast(S, 0.7f), a7 = FloatVector.broadcast(S, 0.8f);
        FloatVector a8 = FloatVector.broadcast(S, 0.9f), a9 = FloatVector.broadcast(S, 1.0f);
        FloatVector a10 = FloatVector.broadcast(S, 1.1f), a11 = FloatVector.broadcast(S, 1.2f);
        for (int i = 0; i < n; i++) {
            // step 1 of 4
            a0 = x.fma(y, a0); a1 = x.fma(y, a1); a2 = x.fma(y, a2); a3 = x.fma(y, a3);
            a4 = x.fma(y, a4); a5 = x.fma(y, a5); a6 = x.fma(y, a6); a7 = x.fma(y, a7);
            a8 = x.fma(y, a8); a9 = x.fma(y, a9); a10 = x.fma(y, a10); a11 = x.fma(y, a11);
            // step 2 of 4
            a0 = x.fma(y, a0); a1 = x.fma(y, a1); a2 = x.fma(y, a2); a3 = x.fma(y, a3);
            a4 = x.fma(y, a4); a5 = x.fma(y, a5); a6 = x.fma(y, a6); a7 = x.fma(y, a7);
            a8 = x.fma(y, a8); a9 = x.fma(y, a9); a10 = x.fma(y, a10); a11 = x.fma(y, a11);
            // step 3 of 4
            a0 = x.fma(y, a0); a1 = x.fma(y, a1); a2 = x.fma(y, a2); a3 = x.fma(y, a3);
            a4 = x.fma(y, a4); a5 = x.fma(y, a5); a6 = x.fma(y, a6); a7 = x.fma(y, a7);
            a8 = x.fma(y, a8); a9 = x.fma(y, a9); a10 = x.fma(y, a10); a11 = x.fma(y, a11);
            // step 4 of 4
            a0 = x.fma(y, a0); a1 = x.fma(y, a1); a2 = x.fma(y, a2); a3 = x.fma(y, a3);
            a4 = x.fma(y, a4); a5 = x.fma(y, a5); a6 = x.fma(y, a6); a7 = x.fma(y, a7);
            a8 = x.fma(y, a8); a9 = x.fma(y, a9); a10 = x.fma(y, a10); a11 = x.fma(y, a11);
        }
        FloatVector s = a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7).add(a8).add(a9).add(a10).add(a11);
        return s.reduceLanes(VectorOperators.ADD); // a probe's sink: its order does not matter
    }

    /** The scalar form of {@link #vectorRound}: the same {@value #UNROLL} × {@value #CHAINS} FMAs per iteration. */
    private static float scalarRound(int n, float b) {
        float x = b, y = 1e-7f;
        float a0 = 0.1f, a1 = 0.2f, a2 = 0.3f, a3 = 0.4f, a4 = 0.5f, a5 = 0.6f;
        float a6 = 0.7f, a7 = 0.8f, a8 = 0.9f, a9 = 1.0f, a10 = 1.1f, a11 = 1.2f;
        for (int i = 0; i < n; i++) {
            a0 = Math.fma(x, y, a0); a1 = Math.fma(x, y, a1); a2 = Math.fma(x, y, a2); a3 = Math.fma(x, y, a3); a4 = Math.fma(x, y, a4); a5 = Math.fma(x, y, a5);
            a6 = Math.fma(x, y, a6); a7 = Math.fma(x, y, a7); a8 = Math.fma(x, y, a8); a9 = Math.fma(x, y, a9); a10 = Math.fma(x, y, a10); a11 = Math.fma(x, y, a11);
            a0 = Math.fma(x, y, a0); a1 = Math.fma(x, y, a1); a2 = Math.fma(x, y, a2); a3 = Math.fma(x, y, a3); a4 = Math.fma(x, y, a4); a5 = Math.fma(x, y, a5);
            a6 = Math.fma(x, y, a6); a7 = Math.fma(x, y, a7); a8 = Math.fma(x, y, a8); a9 = Math.fma(x, y, a9); a10 = Math.fma(x, y, a10); a11 = Math.fma(x, y, a11);
            a0 = Math.fma(x, y, a0); a1 = Math.fma(x, y, a1); a2 = Math.fma(x, y, a2); a3 = Math.fma(x, y, a3); a4 = Math.fma(x, y, a4); a5 = Math.fma(x, y, a5);
            a6 = Math.fma(x, y, a6); a7 = Math.fma(x, y, a7); a8 = Math.fma(x, y, a8); a9 = Math.fma(x, y, a9); a10 = Math.fma(x, y, a10); a11 = Math.fma(x, y, a11);
            a0 = Math.fma(x, y, a0); a1 = Math.fma(x, y, a1); a2 = Math.fma(x, y, a2); a3 = Math.fma(x, y, a3); a4 = Math.fma(x, y, a4); a5 = Math.fma(x, y, a5);
            a6 = Math.fma(x, y, a6); a7 = Math.fma(x, y, a7); a8 = Math.fma(x, y, a8); a9 = Math.fma(x, y, a9); a10 = Math.fma(x, y, a10); a11 = Math.fma(x, y, a11);
        }
        return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    }
}
