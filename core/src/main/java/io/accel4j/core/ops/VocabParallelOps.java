package io.accel4j.core.ops;

import io.accel4j.core.memory.DeviceMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * What a vocabulary-parallel embedding and cross-entropy need on one rank, which holds rows {@code [vFrom, vFrom +
 * vCount)} of the token table (its shard, {@code vCount} rows) and the matching {@code Vs} columns of the logits.
 * The collectives between the ranks (an all-reduce of the embedding's partial outputs; the all-reduced maximum and
 * sums of the loss) are the caller's: these are the local halves, Megatron-LM's vocab-parallel scheme, so that the
 * full logits are never gathered.
 *
 * <p>Cross-entropy over a shard, in three calls around two all-reduces: {@link #classifierShardMax} (then MAX over
 * the ranks), {@link #classifierShardSums} (then SUM), {@link #classifierShardLoss}. The defaults compute on the host
 * (through {@link DeviceMemory#readableOnHost}: in place for host memory, a copy for a device's), accumulating the
 * sums in float64; a backend may override them with kernels.
 */
public interface VocabParallelOps {

    /** The memory the segments are in (every backend's {@link Ops#memory()}). */
    DeviceMemory memory();

    /**
     * {@code out[i] (B·T, C) = (vFrom ≤ tok < vFrom + vCount ? wte[tok − vFrom] : 0) + (wpe != null ? wpe[t] : 0)}
     * for position {@code i = b·T + t}, {@code tok = inp[i]} (int32); {@code wte (vCount, C)}, {@code wpe (T, C)}.
     */
    default void encoderForwardShard(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                                     int B, int T, int C, int vFrom, int vCount) {
        long n = (long) B * T;
        OpChecks.floats("out", out, n * C);
        OpChecks.ints("inp", inp, n);
        OpChecks.floats("wte", wte, (long) vCount * C);
        if (wpe != null) {
            OpChecks.floats("wpe", wpe, (long) T * C);
        }
        DeviceMemory m = memory();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment o = m.writableOnHost(out.asSlice(0, n * C * Float.BYTES), a);
            MemorySegment in = m.readableOnHost(inp.asSlice(0, n * Integer.BYTES), a);
            MemorySegment w = m.readableOnHost(wte.asSlice(0, (long) vCount * C * Float.BYTES), a);
            MemorySegment p = wpe == null ? null : m.readableOnHost(wpe.asSlice(0, (long) T * C * Float.BYTES), a);
            for (long i = 0; i < n; i++) {
                int local = in.getAtIndex(ValueLayout.JAVA_INT, i) - vFrom;
                boolean mine = local >= 0 && local < vCount;
                long t = i % T;
                for (int c = 0; c < C; c++) {
                    float v = mine ? w.getAtIndex(ValueLayout.JAVA_FLOAT, (long) local * C + c) : 0f;
                    if (p != null) {
                        v = mine ? v + p.getAtIndex(ValueLayout.JAVA_FLOAT, t * C + c)
                                : p.getAtIndex(ValueLayout.JAVA_FLOAT, t * C + c);
                    }
                    o.setAtIndex(ValueLayout.JAVA_FLOAT, i * C + c, v);
                }
            }
            m.writeBack(o, out.asSlice(0, n * C * Float.BYTES));
        }
    }

    /**
     * {@code dwte[tok − vFrom] += dout[i]} for the positions whose token is in the shard, in position order;
     * {@code dwpe[t] += dout[i]} for every position when {@code dwpe} is not null.
     */
    default void encoderBackwardShard(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                      int B, int T, int C, int vFrom, int vCount) {
        long n = (long) B * T;
        OpChecks.floats("dout", dout, n * C);
        OpChecks.ints("inp", inp, n);
        OpChecks.floats("dwte", dwte, (long) vCount * C);
        if (dwpe != null) {
            OpChecks.floats("dwpe", dwpe, (long) T * C);
        }
        DeviceMemory m = memory();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment d = m.readableOnHost(dout.asSlice(0, n * C * Float.BYTES), a);
            MemorySegment in = m.readableOnHost(inp.asSlice(0, n * Integer.BYTES), a);
            MemorySegment w = m.readableOnHost(dwte.asSlice(0, (long) vCount * C * Float.BYTES), a);
            MemorySegment p = dwpe == null ? null : m.readableOnHost(dwpe.asSlice(0, (long) T * C * Float.BYTES), a);
            for (long i = 0; i < n; i++) {
                int local = in.getAtIndex(ValueLayout.JAVA_INT, i) - vFrom;
                long t = i % T;
                for (int c = 0; c < C; c++) {
                    float g = d.getAtIndex(ValueLayout.JAVA_FLOAT, i * C + c);
                    if (local >= 0 && local < vCount) {
                        long k = (long) local * C + c;
                        w.setAtIndex(ValueLayout.JAVA_FLOAT, k, w.getAtIndex(ValueLayout.JAVA_FLOAT, k) + g);
                    }
                    if (p != null) {
                        long k = t * C + c;
                        p.setAtIndex(ValueLayout.JAVA_FLOAT, k, p.getAtIndex(ValueLayout.JAVA_FLOAT, k) + g);
                    }
                }
            }
            m.writeBack(w, dwte.asSlice(0, (long) vCount * C * Float.BYTES));
            if (p != null) {
                m.writeBack(p, dwpe.asSlice(0, (long) T * C * Float.BYTES));
            }
        }
    }

    /** {@code max[i] (N) = max_{j < Vv} logits[i, j]} of the {@code (N, Vs)} shard; −∞ when {@code Vv = 0}. */
    default void classifierShardMax(MemorySegment max, MemorySegment logits, int N, int Vv, int Vs) {
        checkShard(logits, N, Vv, Vs);
        OpChecks.floats("max", max, N);
        DeviceMemory m = memory();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment x = m.readableOnHost(logits.asSlice(0, (long) N * Vs * Float.BYTES), a);
            MemorySegment o = m.writableOnHost(max.asSlice(0, (long) N * Float.BYTES), a);
            for (long i = 0; i < N; i++) {
                float best = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < Vv; j++) {
                    best = Math.max(best, x.getAtIndex(ValueLayout.JAVA_FLOAT, i * Vs + j));
                }
                o.setAtIndex(ValueLayout.JAVA_FLOAT, i, best);
            }
            m.writeBack(o, max.asSlice(0, (long) N * Float.BYTES));
        }
    }

    /**
     * {@code sums[i, 0] (N, 2) = Σ_{j < Vv} exp(logits[i, j] − max[i])} (float64, stored fp32) and {@code sums[i, 1] =
     * logits[i, targets[i] − V0]} when the target is in the shard's classes {@code [V0, V0 + Vv)}, else 0; {@code max}
     * is the maximum over every rank's shard.
     */
    default void classifierShardSums(MemorySegment sums, MemorySegment logits, MemorySegment max,
                                     MemorySegment targets, int N, int V0, int Vv, int Vs) {
        checkShard(logits, N, Vv, Vs);
        OpChecks.floats("sums", sums, 2L * N);
        OpChecks.floats("max", max, N);
        OpChecks.ints("targets", targets, N);
        DeviceMemory m = memory();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment x = m.readableOnHost(logits.asSlice(0, (long) N * Vs * Float.BYTES), a);
            MemorySegment mx = m.readableOnHost(max.asSlice(0, (long) N * Float.BYTES), a);
            MemorySegment tg = m.readableOnHost(targets.asSlice(0, (long) N * Integer.BYTES), a);
            MemorySegment o = m.writableOnHost(sums.asSlice(0, 2L * N * Float.BYTES), a);
            for (long i = 0; i < N; i++) {
                float mi = mx.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                double s = 0;
                for (int j = 0; j < Vv; j++) {
                    s += Math.exp(x.getAtIndex(ValueLayout.JAVA_FLOAT, i * Vs + j) - mi);
                }
                int t = tg.getAtIndex(ValueLayout.JAVA_INT, i) - V0;
                o.setAtIndex(ValueLayout.JAVA_FLOAT, 2 * i, (float) s);
                o.setAtIndex(ValueLayout.JAVA_FLOAT, 2 * i + 1,
                        t >= 0 && t < Vv ? x.getAtIndex(ValueLayout.JAVA_FLOAT, i * Vs + t) : 0f);
            }
            m.writeBack(o, sums.asSlice(0, 2L * N * Float.BYTES));
        }
    }

    /**
     * With the all-reduced {@code max} and {@code sums}: {@code losses[i] = log(sums[i,0]) + max[i] − sums[i,1]};
     * with {@code backward}, then in place {@code logits[i, j] ← dlossScale·(exp(logits[i, j] − max[i])/sums[i,0] −
     * [j = targets[i] − V0])} for {@code j < Vv} and 0 for the shard's padding {@code [Vv, Vs)}. Returns the mean loss
     * (float64).
     */
    default double classifierShardLoss(MemorySegment losses, MemorySegment logits, MemorySegment max,
                                       MemorySegment sums, MemorySegment targets, int N, int V0, int Vv, int Vs,
                                       float dlossScale, boolean backward) {
        checkShard(logits, N, Vv, Vs);
        OpChecks.floats("losses", losses, N);
        OpChecks.floats("sums", sums, 2L * N);
        OpChecks.floats("max", max, N);
        OpChecks.ints("targets", targets, N);
        DeviceMemory m = memory();
        double total = 0;
        try (Arena a = Arena.ofConfined()) {
            long xb = (long) N * Vs * Float.BYTES;
            MemorySegment x = backward ? m.readableOnHost(logits.asSlice(0, xb), a) : null;
            MemorySegment mx = m.readableOnHost(max.asSlice(0, (long) N * Float.BYTES), a);
            MemorySegment sm = m.readableOnHost(sums.asSlice(0, 2L * N * Float.BYTES), a);
            MemorySegment tg = m.readableOnHost(targets.asSlice(0, (long) N * Integer.BYTES), a);
            MemorySegment lo = m.writableOnHost(losses.asSlice(0, (long) N * Float.BYTES), a);
            for (long i = 0; i < N; i++) {
                float mi = mx.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                double s = sm.getAtIndex(ValueLayout.JAVA_FLOAT, 2 * i);
                float loss = (float) (Math.log(s) + mi - sm.getAtIndex(ValueLayout.JAVA_FLOAT, 2 * i + 1));
                lo.setAtIndex(ValueLayout.JAVA_FLOAT, i, loss);
                total += loss;
                if (backward) {
                    int t = tg.getAtIndex(ValueLayout.JAVA_INT, i) - V0;
                    for (int j = 0; j < Vs; j++) {
                        long k = i * Vs + j;
                        float g = 0f;
                        if (j < Vv) {
                            double pr = Math.exp(x.getAtIndex(ValueLayout.JAVA_FLOAT, k) - mi) / s;
                            g = (float) (dlossScale * (pr - (j == t ? 1 : 0)));
                        }
                        x.setAtIndex(ValueLayout.JAVA_FLOAT, k, g);
                    }
                }
            }
            m.writeBack(lo, losses.asSlice(0, (long) N * Float.BYTES));
            if (backward) {
                m.writeBack(x, logits.asSlice(0, xb));
            }
        }
        return total / N;
    }

    private static void checkShard(MemorySegment logits, int N, int Vv, int Vs) {
        OpChecks.positive("N", N);
        OpChecks.positive("Vs", Vs);
        if (Vv < 0 || Vv > Vs) {
            throw new IllegalArgumentException("Vv (the shard's classes) must be in [0, Vs = " + Vs + "], got " + Vv);
        }
        OpChecks.floats("logits", logits, (long) N * Vs);
    }
}
