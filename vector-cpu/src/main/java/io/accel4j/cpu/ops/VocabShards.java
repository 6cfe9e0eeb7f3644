package io.accel4j.cpu.ops;

import io.accel4j.core.ops.OpChecks;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import jdk.incubator.vector.VectorSpecies;

/**
 * The vocab-parallel cross-entropy's local halves on the CPU ({@link io.accel4j.core.ops.VocabParallelOps}): one
 * rank's {@code (N, Vs)} shard of the logits, of which columns {@code [0, Vv)} are real classes.
 * <pre>
 *   max[i]      = max_{j &lt; Vv} x[i, j]                                     (−∞ when Vv = 0)
 *   sums[i, 0]  = Σ_{j &lt; Vv} exp(x[i, j] − M[i]),  sums[i, 1] = x[i, t − V0] or 0   (M: the group's max)
 *   losses[i]   = log(S[i]) + M[i] − xt[i];  backward: x[i, j] ← dlossScale·(exp(x[i, j] − M[i])/S[i] − [j = t − V0])
 * </pre>
 * The exponentials are attention's ({@code Softmax.expRow}: Cephes' expf in fp32 fused multiply-adds, the same bits
 * in every JIT tier), summed in fp32 lanes over blocks of {@value #BLOCK} and the blocks in float64, so S is within
 * about {@code (BLOCK/lanes + 2)·2⁻²⁴} relative of the float64 reference (the contract's defaults). Rows are split
 * over the pool; each row's result does not depend on the thread count.
 */
final class VocabShards {

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final int L = F.length();
    private static final int BLOCK = 256;
    private static final long TASK_ELEMENTS = 1 << 15;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    private VocabShards() {}

    static void max(Parallel pool, MemorySegment max, MemorySegment logits, int N, int Vv, int Vs) {
        check(logits, N, Vv, Vs);
        OpChecks.floats("max", max, N);
        rows(pool, N, Vs, (i, buf) -> {
            float m = FusedClassifier.rowMax(logits, (long) i * Vs * Float.BYTES, Vv);
            max.setAtIndex(F32, i, m);
        });
    }

    static void sums(Parallel pool, MemorySegment sums, MemorySegment logits, MemorySegment max,
                     MemorySegment targets, int N, int V0, int Vv, int Vs) {
        check(logits, N, Vv, Vs);
        OpChecks.floats("sums", sums, 2L * N);
        OpChecks.floats("max", max, N);
        OpChecks.ints("targets", targets, N);
        rows(pool, N, Vs, (i, buf) -> {
            long base = (long) i * Vs;
            MemorySegment.copy(logits, F32, base * Float.BYTES, buf, 0, Vv);
            double s = expSum(buf, Vv, max.getAtIndex(F32, i));
            int t = targets.getAtIndex(I32, i) - V0;
            sums.setAtIndex(F32, 2L * i, (float) s);
            sums.setAtIndex(F32, 2L * i + 1, t >= 0 && t < Vv ? logits.getAtIndex(F32, base + t) : 0f);
        });
    }

    static double loss(Parallel pool, MemorySegment losses, MemorySegment logits, MemorySegment max,
                       MemorySegment sums, MemorySegment targets, int N, int V0, int Vv, int Vs, float dlossScale,
                       boolean backward) {
        check(logits, N, Vv, Vs);
        OpChecks.floats("losses", losses, N);
        OpChecks.floats("sums", sums, 2L * N);
        OpChecks.floats("max", max, N);
        OpChecks.ints("targets", targets, N);
        rows(pool, N, Vs, (i, buf) -> {
            float m = max.getAtIndex(F32, i);
            double s = sums.getAtIndex(F32, 2L * i);
            losses.setAtIndex(F32, i, (float) (Math.log(s) + m - sums.getAtIndex(F32, 2L * i + 1)));
            if (!backward) {
                return;
            }
            long base = (long) i * Vs;
            MemorySegment.copy(logits, F32, base * Float.BYTES, buf, 0, Vv);
            expSum(buf, Vv, m); // buf[j] = exp(x − M)
            float k = (float) (dlossScale / s);
            for (int j = 0; j < Vv; j++) {
                buf[j] *= k;
            }
            int t = targets.getAtIndex(I32, i) - V0;
            if (t >= 0 && t < Vv) {
                buf[t] -= dlossScale;
            }
            java.util.Arrays.fill(buf, Vv, Vs, 0f);
            MemorySegment.copy(buf, 0, logits, F32, base * Float.BYTES, Vs);
        });
        double sum = 0;
        for (int i = 0; i < N; i++) {
            sum += losses.getAtIndex(F32, i);
        }
        return sum / N;
    }

    /** {@code buf[j] = exp(buf[j] − m)} for j &lt; n; returns their sum, fp32 within blocks, float64 across. */
    private static double expSum(float[] buf, int n, float m) {
        float[] lanes = new float[L];
        double s = 0;
        for (int off = 0; off < n; off += BLOCK) {
            s += Softmax.expRow(buf, off, Math.min(BLOCK, n - off), m, lanes);
        }
        return s;
    }

    private interface Row {
        void run(int i, float[] buf);
    }

    /** Runs {@code row} for every row, rows grouped into tasks of about {@value #TASK_ELEMENTS} logits. */
    private static void rows(Parallel pool, int N, int Vs, Row row) {
        int perTask = (int) Math.max(1, TASK_ELEMENTS / Vs);
        int tasks = (N + perTask - 1) / perTask;
        pool.forEach(tasks, task -> {
            float[] buf = new float[Vs];
            for (int i = task * perTask, end = Math.min(N, (task + 1) * perTask); i < end; i++) {
                row.run(i, buf);
            }
        });
    }

    private static void check(MemorySegment logits, int N, int Vv, int Vs) {
        OpChecks.positive("N", N);
        OpChecks.positive("Vs", Vs);
        if (Vv < 0 || Vv > Vs) {
            throw new IllegalArgumentException("Vv (the shard's classes) must be in [0, Vs = " + Vs + "], got " + Vv);
        }
        OpChecks.floats("logits", logits, (long) N * Vs);
    }
}
