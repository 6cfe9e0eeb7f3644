package io.accel4j.cpu.ops;

import io.accel4j.core.ops.ReductionOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Whole-buffer reductions over n fp32 values {@code x (n)}: the sum of squares (gradient-norm clipping), whether any
 * value is non-finite (loss scaling), the largest magnitude (FP8 scaling).
 *
 * <p>The buffer is cut into fixed chunks of {@value #CHUNK} elements, spread over the pool; the chunks' partial
 * results are combined in chunk order, so every result is the same on any number of threads.
 *
 * <p>{@link #sumOfSquares}: within a chunk, four fp32 vector accumulators take {@code x·x} by fused multiply-add
 * over blocks of {@value #BLOCK} elements, so each lane sums at most k = {@code BLOCK/(4·lanes) + 3} ≤ 35 squares
 * (at 128 bits; the 3 are a short last block's single vectors); after each block the lanes are widened to float64 and
 * added to float64 lanes, which are summed in a fixed order at the chunk's end; the elements after the last whole
 * vector are squared and summed in float64. All terms are ≥ 0 and each fma rounds once, so the result is within
 * {@code k·2⁻²⁴·Σx²} ≤ {@code 35·2⁻²⁴·Σx²} of the exact sum (plus float64 rounding, n·2⁻⁵³ relative), whatever n is;
 * a long fp32 accumulation would lose small squares added to a large lane entirely.
 */
public final class Reductions {

    private Reductions() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final VectorSpecies<Integer> I = F.withLanes(int.class);
    private static final VectorSpecies<Double> D = VectorSpecies.of(double.class, F.vectorShape());
    private static final int L = F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    /** Elements per task (a multiple of BLOCK). */
    static final int CHUNK = 1 << 16;
    /** Elements summed in fp32 lanes before the lanes are widened to float64. */
    static final int BLOCK = 512;
    private static final int ABS = 0x7FFF_FFFF;
    private static final int INF_BITS = 0x7F80_0000;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    /**
     * {@code Σ x[i]²}, accumulated as the class comment says (float64 across blocks and chunks). NaN or ±inf in x
     * give a non-finite result; 0 when n is 0.
     */
    public static double sumOfSquares(Parallel pool, MemorySegment x, long n) {
        int tasks = check(pool, x, n);
        double[] partial = new double[tasks];
        Tasks.ranges(pool, n, CHUNK, (task, from, to) -> partial[task] = sumOfSquares(x, from, to));
        double sum = 0;
        for (double p : partial) {
            sum += p;
        }
        return sum;
    }

    private static double sumOfSquares(MemorySegment x, long from, long to) {
        double sum = 0;
        long i = from;
        if (VECTOR) {
            DoubleVector acc = DoubleVector.zero(D);
            long bound = to - (to - from) % L;
            while (i < bound) {
                long blockEnd = Math.min(bound, i + BLOCK);
                FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
                for (; i + 4L * L <= blockEnd; i += 4L * L) {
                    long at = i * 4;
                    FloatVector x0 = FloatVector.fromMemorySegment(F, x, at, LE);
                    FloatVector x1 = FloatVector.fromMemorySegment(F, x, at + 4L * L, LE);
                    FloatVector x2 = FloatVector.fromMemorySegment(F, x, at + 8L * L, LE);
                    FloatVector x3 = FloatVector.fromMemorySegment(F, x, at + 12L * L, LE);
                    a0 = x0.fma(x0, a0);
                    a1 = x1.fma(x1, a1);
                    a2 = x2.fma(x2, a2);
                    a3 = x3.fma(x3, a3);
                }
                for (; i < blockEnd; i += L) {
                    FloatVector x0 = FloatVector.fromMemorySegment(F, x, i * 4, LE);
                    a0 = x0.fma(x0, a0);
                }
                acc = acc.add(a0.convertShape(VectorOperators.F2D, D, 0))
                        .add(a0.convertShape(VectorOperators.F2D, D, 1))
                        .add(a1.convertShape(VectorOperators.F2D, D, 0))
                        .add(a1.convertShape(VectorOperators.F2D, D, 1))
                        .add(a2.convertShape(VectorOperators.F2D, D, 0))
                        .add(a2.convertShape(VectorOperators.F2D, D, 1))
                        .add(a3.convertShape(VectorOperators.F2D, D, 0))
                        .add(a3.convertShape(VectorOperators.F2D, D, 1));
            }
            double[] lanes = new double[D.length()];
            acc.intoArray(lanes, 0);
            for (double lane : lanes) { // a fixed order (reduceLanes may add in any order)
                sum += lane;
            }
        }
        for (; i < to; i++) {
            double xi = x.get(F32, i * 4);
            sum += xi * xi;
        }
        return sum;
    }

    /** Whether any of the n values is NaN or ±inf. */
    public static boolean hasNonFinite(Parallel pool, MemorySegment x, long n) {
        return Integer.compareUnsigned(maxAbsBits(pool, x, n), INF_BITS) >= 0;
    }

    /** {@code max |x[i]|}; NaN when any value is NaN, +inf when one is ±inf and none is NaN, 0 when n is 0. */
    public static float amax(Parallel pool, MemorySegment x, long n) {
        int bits = maxAbsBits(pool, x, n);
        return bits > INF_BITS ? Float.NaN : Float.intBitsToFloat(bits);
    }

    /**
     * The largest {@code bits(x[i]) & 0x7FFFFFFF}: magnitudes order as their bit patterns, and every NaN's is above
     * infinity's.
     */
    private static int maxAbsBits(Parallel pool, MemorySegment x, long n) {
        int tasks = check(pool, x, n);
        int[] partial = new int[tasks];
        Tasks.ranges(pool, n, CHUNK, (task, from, to) -> partial[task] = maxAbsBits(x, from, to));
        int max = 0;
        for (int p : partial) {
            max = Math.max(max, p);
        }
        return max;
    }

    private static int maxAbsBits(MemorySegment x, long from, long to) {
        int max = 0;
        long i = from;
        if (VECTOR) {
            IntVector m0 = IntVector.zero(I), m1 = m0;
            long bound2 = to - (to - from) % (2L * L);
            for (; i < bound2; i += 2L * L) {
                long at = i * 4;
                m0 = m0.max(IntVector.fromMemorySegment(I, x, at, LE).and(ABS));
                m1 = m1.max(IntVector.fromMemorySegment(I, x, at + 4L * L, LE).and(ABS));
            }
            max = m0.max(m1).reduceLanes(VectorOperators.MAX); // exact in any order
        }
        for (; i < to; i++) {
            max = Math.max(max, x.get(I32, i * 4) & ABS);
        }
        return max;
    }

    /** Checks the arguments; returns the number of chunks. */
    private static int check(Parallel pool, MemorySegment x, long n) {
        Objects.requireNonNull(pool, "pool");
        ReductionOps.checkReduction(x, n);
        Check.shared("x", x, pool.threads());
        long tasks = (n + CHUNK - 1) / CHUNK;
        if (tasks > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("n = " + n + " is too large (more than " + Integer.MAX_VALUE
                    + " chunks of " + CHUNK + ")");
        }
        return (int) tasks;
    }
}
