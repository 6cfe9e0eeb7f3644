package io.accel4j.cpu.ops;

import io.accel4j.core.ops.ClassifierOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Softmax cross-entropy over the vocabulary, fused with its gradient (llm.c's {@code fused_classifier}).
 *
 * <p>Shapes: {@code logits (N, Vp)} fp32, rows of {@code Vp} floats of which only columns {@code [0, V)} take part
 * (the padding {@code [V, Vp)} is never read, so it may hold anything, NaN included); {@code targets (N)} int32 in
 * {@code [0, V)}; {@code losses (N)} fp32. Per row i, with {@code x = logits[i, 0:V]} and {@code t = targets[i]}:
 * <pre>
 *   M = max_j x[j],   S = Σ_j exp(x[j] − M)            (exp in fp32, S accumulated as described below)
 *   losses[i] = log(S) + M − x[t]                       (in float64, stored as fp32)
 *   backward, in place:  logits[i, j] = (exp(x[j] − M)/S − [j = t])·dlossScale   for j &lt; V,   0 for V ≤ j &lt; Vp
 * </pre>
 * and the returned mean is {@code Σ_i losses[i] / N}, the stored fp32 losses summed in float64 in row order.
 *
 * <p>Passes over a row: the max (the one read from memory), then the exponentials (from L2: a GPT-2 row is 197 KiB),
 * which the backward writes back in place, then the scaling by {@code dlossScale/S} — so one {@code exp} per element.
 * (An online max/sum pass would read the row once, but must rescale its sum or evaluate the exponentials again for
 * the backward; the re-read from L2 is cheaper than a second {@code exp}.) A task takes a run of rows and takes the
 * next row's max inside this row's exponential pass, so that the next row streams in from memory while the
 * exponentials are computed, instead of the two alternating between memory and arithmetic. The exponentials are
 * summed in fp32 lanes over blocks of {@value #BLOCK} elements, each block's lanes then widened and added in float64;
 * the lanes are summed in a fixed order at the end of the row. So {@code S} is off by at most about
 * {@code (BLOCK/lanes + 2)·2⁻²⁴} relative, and rows are independent: the work is split over rows, and the result does
 * not depend on the thread count or on how the rows are grouped.
 *
 * <p>The exponential is attention's, {@link Softmax#exp(FloatVector, float)} and its scalar twin (Cephes' {@code expf}:
 * a range reduction and a polynomial, in fp32 fused multiply-adds, ≤ ~1 ulp), clamped at {@link #EXP_MIN}, rather
 * than {@code lanewise(EXP)}: C2 compiles that to SVML, whose results differ from the Java fallback the interpreter
 * and C1 run in about 4 % of cases, so a row's bits would depend on whether it ran compiled. Here every step is an
 * exactly specified fp32 or integer operation, done alike by the lanes and by the scalar tail, so an exponential has
 * the same bits on every path.
 */
public final class FusedClassifier {

    private FusedClassifier() {}

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    /** float64 lanes of the same vector size: a float vector widens into two of them. */
    private static final VectorSpecies<Double> D = VectorSpecies.of(double.class, F.vectorShape());
    private static final int L = F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    /** Elements per fp32 partial sum of the exponentials before it is widened to float64. */
    private static final int BLOCK = 256;
    /** About this many logits per task: GPT-2 rows are one task each, tiny rows are grouped. */
    private static final long TASK_ELEMENTS = 1 << 15;
    /**
     * The exponential's arguments are clamped here (attention's clamp, {@link Softmax#EXP_LO}, is −88): k ≥ −127, and k = −127 gives the bits of +0, so exp(y) for y ≤ −87.7 (where it is
     * below 2⁻¹²⁶, immaterial next to the sum's 1) is 0, and exp(−∞) is 0 rather than NaN.
     */
    private static final float EXP_MIN = -88.3f;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    /**
     * {@code losses[i] = −log softmax(logits[i, 0:V])[targets[i]]}; logits are only read.
     *
     * @param pool    threads (rows are split over them)
     * @param losses  (N) fp32, written
     * @param logits  (N, Vp) fp32, read (columns ≥ V never)
     * @param targets (N) int32, each in [0, V)
     * @return the mean loss, accumulated in float64 in row order
     */
    public static double forward(Parallel pool, MemorySegment losses, MemorySegment logits, MemorySegment targets,
                                 int N, int V, int Vp) {
        check(pool, losses, logits, targets, N, V, Vp, 1f, false);
        run(pool, losses, logits, targets, N, V, Vp, 0f, false);
        return mean(losses, N);
    }

    /**
     * The forward, then in place {@code logits[i, 0:V] ← dlossScale·(softmax(logits[i, 0:V]) − onehot(targets[i]))}
     * and {@code logits[i, V:Vp] ← 0}. With {@code dlossScale = 1/N} this is the gradient of the mean loss.
     *
     * @param logits     (N, Vp) fp32: read, then overwritten by dlogits
     * @param losses     (N) fp32, written
     * @param targets    (N) int32, each in [0, V)
     * @param dlossScale finite; multiplies every gradient
     * @return the mean loss, accumulated in float64 in row order
     */
    public static double forwardBackward(Parallel pool, MemorySegment logits, MemorySegment losses,
                                         MemorySegment targets, int N, int V, int Vp, float dlossScale) {
        check(pool, losses, logits, targets, N, V, Vp, dlossScale, true);
        run(pool, losses, logits, targets, N, V, Vp, dlossScale, true);
        return mean(losses, N);
    }

    private static void run(Parallel pool, MemorySegment losses, MemorySegment logits, MemorySegment targets,
                            int N, int V, int Vp, float dlossScale, boolean backward) {
        int rowsPerTask = rowsPerTask(pool.threads(), N, Vp);
        int tasks = (N + rowsPerTask - 1) / rowsPerTask;
        long rowBytes = (long) Vp * Float.BYTES;
        pool.forEach(tasks, task -> {
            double[] lanes = new double[D.length()];
            float[] nextMax = new float[1];
            int start = task * rowsPerTask, end = Math.min(N, start + rowsPerTask);
            float max = rowMax(logits, start * rowBytes, V);
            for (int i = start; i < end; i++) {
                int t = targets.getAtIndex(I32, i);
                long next = (i + 1 < end ? i + 1 : i) * rowBytes; // the last row reads itself again, from L2
                float loss = row(logits, i * rowBytes, max, next, nextMax, V, Vp, t, dlossScale, backward, lanes);
                losses.setAtIndex(F32, i, loss);
                max = nextMax[0];
            }
        });
    }

    /**
     * Rows per task: large rows come in runs of a quarter of a thread's share (so each task overlaps all but its first
     * row's max with the previous row's exponentials, and the threads still balance), small rows in groups of about
     * {@link #TASK_ELEMENTS} logits. Rows are independent, so the grouping never changes a result.
     */
    static int rowsPerTask(int threads, int N, int Vp) {
        if (Vp >= TASK_ELEMENTS) {
            return Math.max(1, N / (4 * threads));
        }
        return (int) (TASK_ELEMENTS / Vp);
    }

    /**
     * {@code max_j x[j]} over the row of floats at byte {@code base}, {@code j < V}: the first row of a task here, and
     * a shard's row in {@link VocabShards}. Exact, so the same value however the lanes are combined.
     */
    static float rowMax(MemorySegment logits, long base, int V) {
        int j = 0;
        int bound = VECTOR ? V - V % L : 0;
        float max = Float.NEGATIVE_INFINITY;
        if (VECTOR && bound > 0) {
            // two accumulators: a lanewise max (Math.max's NaN and signed-zero rules) is a chain of several
            // instructions, and one accumulator would wait on it
            FloatVector m0 = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY), m1 = m0;
            for (; j + 2 * L <= bound; j += 2 * L) {
                m0 = m0.max(FloatVector.fromMemorySegment(F, logits, base + (long) j * 4, LE));
                m1 = m1.max(FloatVector.fromMemorySegment(F, logits, base + (long) (j + L) * 4, LE));
            }
            for (; j < bound; j += L) {
                m0 = m0.max(FloatVector.fromMemorySegment(F, logits, base + (long) j * 4, LE));
            }
            max = m0.max(m1).reduceLanes(VectorOperators.MAX); // max is exact: any order gives the same value
        }
        for (; j < V; j++) {
            max = Math.max(max, logits.get(F32, base + (long) j * 4));
        }
        return max;
    }

    /**
     * One row (starting at byte {@code base}, whose maximum is {@code max}): returns its loss; with {@code backward},
     * writes its gradient. Its exponentials' pass also takes the maximum of the row at byte {@code next} into
     * {@code nextMax[0]}: that row streams in from memory while this one's exponentials are computed from L2.
     */
    private static float row(MemorySegment logits, long base, float max, long next, float[] nextMax, int V, int Vp,
                             int t, float dlossScale, boolean backward, double[] lanes) {
        int bound = VECTOR ? V - V % L : 0;
        float xt = logits.get(F32, base + (long) t * 4); // read before the backward overwrites it
        // Σ exp(x − max), fp32 lanes per block, float64 across blocks; the backward stores the exponentials
        double sum = 0;
        float mxNext = Float.NEGATIVE_INFINITY;
        int j = 0;
        if (VECTOR && bound > 0) {
            DoubleVector acc = DoubleVector.zero(D);
            FloatVector mx0 = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY), mx1 = mx0;
            FloatVector zero = FloatVector.zero(F);
            while (j < bound) {
                int blockEnd = Math.min(bound, j + BLOCK);
                FloatVector part = FloatVector.zero(F);
                // two vectors at a time; a block's odd last vector pairs with itself, its twin adding +0 (the
                // exponentials are ≥ +0 or NaN, so part + e + 0 is part + e, bit for bit)
                for (; j < blockEnd; j += 2 * L) {
                    boolean pair = j + L < blockEnd;
                    long j1 = pair ? j + L : j;
                    long at0 = base + (long) j * 4, at1 = base + j1 * 4;
                    mx0 = mx0.max(FloatVector.fromMemorySegment(F, logits, next + (long) j * 4, LE));
                    mx1 = mx1.max(FloatVector.fromMemorySegment(F, logits, next + j1 * 4, LE));
                    FloatVector e0 = Softmax.exp(FloatVector.fromMemorySegment(F, logits, at0, LE).sub(max), EXP_MIN);
                    FloatVector e1 = Softmax.exp(FloatVector.fromMemorySegment(F, logits, at1, LE).sub(max), EXP_MIN);
                    if (backward) {
                        e0.intoMemorySegment(logits, at0, LE);
                        e1.intoMemorySegment(logits, at1, LE);
                    }
                    part = part.add(e0).add(pair ? e1 : zero);
                }
                j = blockEnd;
                acc = acc.add(part.convertShape(VectorOperators.F2D, D, 0))
                        .add(part.convertShape(VectorOperators.F2D, D, 1));
            }
            acc.intoArray(lanes, 0);
            for (double lane : lanes) { // a fixed order (reduceLanes may add in any order)
                sum += lane;
            }
            mxNext = mx0.max(mx1).reduceLanes(VectorOperators.MAX);
        }
        for (; j < V; j++) {
            long at = base + (long) j * 4;
            mxNext = Math.max(mxNext, logits.get(F32, next + (long) j * 4));
            float e = Softmax.exp(logits.get(F32, at) - max, EXP_MIN); // the lanes' exp, operation for operation
            if (backward) {
                logits.set(F32, at, e);
            }
            sum += e;
        }
        nextMax[0] = mxNext;
        float loss = (float) (Math.log(sum) + max - xt);
        if (!backward) {
            return loss;
        }
        // pass 3: dlogits = exp/S·dlossScale − [j = t]·dlossScale, padding zeroed
        float k = (float) (dlossScale / sum);
        j = 0;
        if (VECTOR) {
            for (; j < bound; j += L) {
                long at = base + (long) j * 4;
                FloatVector.fromMemorySegment(F, logits, at, LE).mul(k).intoMemorySegment(logits, at, LE);
            }
        }
        for (; j < V; j++) {
            long at = base + (long) j * 4;
            logits.set(F32, at, logits.get(F32, at) * k);
        }
        long at = base + (long) t * 4;
        logits.set(F32, at, logits.get(F32, at) - dlossScale);
        if (Vp > V) {
            logits.asSlice(base + (long) V * 4, (long) (Vp - V) * 4).fill((byte) 0);
        }
        return loss;
    }

    private static double mean(MemorySegment losses, int N) {
        double sum = 0;
        for (int i = 0; i < N; i++) {
            sum += losses.getAtIndex(F32, i);
        }
        return sum / N;
    }

    private static void check(Parallel pool, MemorySegment losses, MemorySegment logits, MemorySegment targets,
                              int N, int V, int Vp, float dlossScale, boolean backward) {
        Objects.requireNonNull(pool, "pool");
        ClassifierOps.checkSizes(losses, logits, targets, N, V, Vp);
        if (!Float.isFinite(dlossScale)) {
            throw new IllegalArgumentException("dlossScale must be finite, got " + dlossScale);
        }
        long logitsCount = (long) N * Vp;
        Check.shared("losses", losses, pool.threads());
        Check.shared("logits", logits, pool.threads());
        Check.shared("targets", targets, pool.threads());
        Check.disjoint("losses", losses, (long) N * 4, "logits", logits, logitsCount * 4);
        Check.disjoint("losses", losses, (long) N * 4, "targets", targets, (long) N * 4);
        if (backward) {
            Check.disjoint("logits", logits, logitsCount * 4, "targets", targets, (long) N * 4);
        }
        for (int i = 0; i < N; i++) {
            int t = targets.getAtIndex(I32, i);
            if (t < 0 || t >= V) {
                throw new IllegalArgumentException("targets[" + i + "] = " + t + " is outside [0, V) = [0, " + V
                        + ")");
            }
        }
    }
}
