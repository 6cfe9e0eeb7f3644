package io.accel4j.cpu.ops;

import io.accel4j.core.ops.EncoderOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Token plus position embedding.
 *
 * <pre>
 *   forward:  out[b,t,:] (B,T,C) = wte[inp[b,t], :] + wpe[t, :]
 *   backward: dwte[inp[b,t], :] += dout[b,t,:],  dwpe[t, :] += dout[b,t,:]   for every (b,t), in (b,t) order
 * </pre>
 * {@code inp} is (B,T) int32 tokens, each in {@code [0, V)} (checked: a bad one is named with its position);
 * {@code wte} is (V,C), {@code wpe} at least (T,C), all fp32 row-major. The forward splits rows of {@code out}
 * over tasks. The backward is a scatter-add, so tasks own rows of the gradients instead: each one walks every (b,t)
 * in order and adds the dout rows of the tokens and positions it owns (k modulo the tasks) into their rows of
 * {@code dwte} and {@code dwpe}. Each gradient element is thus summed in (b,t) order by exactly one task, whatever
 * the split: results are bit-identical on any number of threads, and a token repeated in the batch costs no atomics
 * and no scratch. (Tasks that owned column ranges instead made every thread walk every row of dwte the batch
 * touches, cold after the optimizer's pass: the bench model's step took longer for it on two threads than on one.)
 */
public final class Encoder {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int L = S.length();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private Encoder() {}

    /** {@code out[b,t,:] = wte[inp[b,t], :] + wpe[t, :]}; {@code out} must not overlap the inputs. */
    public static void forward(Parallel pool, MemorySegment out, MemorySegment inp, MemorySegment wte,
                               MemorySegment wpe, int B, int T, int C, int V) {
        Objects.requireNonNull(pool, "pool");
        EncoderOps.checkForward(out, inp, wte, wpe, B, T, C, V);
        long rows = (long) B * T;
        Check.shared("out", out, pool.threads());
        Check.shared("inp", inp, pool.threads());
        Check.shared("wte", wte, pool.threads());
        Check.shared("wpe", wpe, pool.threads());
        long outBytes = rows * C * Float.BYTES;
        Check.disjoint("out", out, outBytes, "inp", inp, rows * Integer.BYTES);
        Check.disjoint("out", out, outBytes, "wte", wte, (long) V * C * Float.BYTES);
        Check.disjoint("out", out, outBytes, "wpe", wpe, (long) T * C * Float.BYTES);
        checkTokens(inp, B, T, V);
        int rowsPerTask = Math.max(1, Tasks.CHUNK / C);
        int tasks = Math.toIntExact((rows + rowsPerTask - 1) / rowsPerTask);
        Tasks.run(pool, tasks, 3 * rows * C, k -> {
            long r0 = (long) k * rowsPerTask;
            forwardRows(out, inp, wte, wpe, T, C, r0, Math.min(rows, r0 + rowsPerTask));
        });
    }

    private static void forwardRows(MemorySegment out, MemorySegment inp, MemorySegment wte, MemorySegment wpe,
                                    int T, int C, long r0, long r1) {
        for (long r = r0; r < r1; r++) {
            long e = (long) inp.getAtIndex(I32, r) * C * Float.BYTES;
            addRow(out, r * C * Float.BYTES, wte, e, wpe, (r % T) * C * Float.BYTES, C);
        }
    }

    /**
     * {@code dwte[inp[b,t], :] += dout[b,t,:]} and {@code dwpe[t, :] += dout[b,t,:]}, summed in (b,t) order.
     * {@code dwte} and {@code dwpe} must not overlap each other or the inputs.
     */
    public static void backward(Parallel pool, MemorySegment dwte, MemorySegment dwpe, MemorySegment dout,
                                MemorySegment inp, int B, int T, int C, int V) {
        Objects.requireNonNull(pool, "pool");
        EncoderOps.checkBackward(dwte, dwpe, dout, inp, B, T, C, V);
        long rows = (long) B * T;
        Check.shared("dwte", dwte, pool.threads());
        Check.shared("dwpe", dwpe, pool.threads());
        Check.shared("dout", dout, pool.threads());
        Check.shared("inp", inp, pool.threads());
        long wteBytes = (long) V * C * Float.BYTES, wpeBytes = (long) T * C * Float.BYTES;
        long doutBytes = rows * C * Float.BYTES, inpBytes = rows * Integer.BYTES;
        Check.disjoint("dwte", dwte, wteBytes, "dwpe", dwpe, wpeBytes);
        Check.disjoint("dwte", dwte, wteBytes, "dout", dout, doutBytes);
        Check.disjoint("dwte", dwte, wteBytes, "inp", inp, inpBytes);
        Check.disjoint("dwpe", dwpe, wpeBytes, "dout", dout, doutBytes);
        Check.disjoint("dwpe", dwpe, wpeBytes, "inp", inp, inpBytes);
        checkTokens(inp, B, T, V);
        // One task per thread: task k owns the rows of dwte whose token is k modulo the tasks, and the rows of dwpe
        // whose position is. Any split gives the same sums.
        int tasks = rows * C * 5 < Tasks.PARALLEL_MIN ? 1 : pool.threads();
        Tasks.run(pool, tasks, 5 * rows * C, k -> backwardRows(dwte, dwpe, dout, inp, rows, T, C, k, tasks));
    }

    /**
     * The (b,t) in order whose token is {@code k} modulo {@code tasks} add their row of dout into dwte, those whose
     * position is into dwpe: each gradient row is one task's, whole, so a thread walks only its own rows of the
     * 50,000-row dwte and reads each dout row once.
     */
    private static void backwardRows(MemorySegment dwte, MemorySegment dwpe, MemorySegment dout, MemorySegment inp,
                                     long rows, int T, int C, int k, int tasks) {
        for (long r = 0; r < rows; r++) {
            long d = r * C * Float.BYTES;
            int token = inp.getAtIndex(I32, r);
            if (token % tasks == k) {
                long e = (long) token * C * Float.BYTES;
                addRow(dwte, e, dwte, e, dout, d, C);
            }
            int t = (int) (r % T);
            if (t % tasks == k) {
                long p = (long) t * C * Float.BYTES;
                addRow(dwpe, p, dwpe, p, dout, d, C);
            }
        }
    }

    /**
     * {@code out[0:C) = a[0:C) + b[0:C)}, each a row at its byte offset, element by element; {@code out} may be
     * {@code a} (an accumulation), as in the backward.
     */
    private static void addRow(MemorySegment out, long o, MemorySegment a, long ao, MemorySegment b, long bo, int C) {
        int bound = Simd.SCALAR ? 0 : C - C % L;
        int c = 0;
        for (; c < bound; c += L) {
            long cb = (long) c * Float.BYTES;
            FloatVector.fromMemorySegment(S, a, ao + cb, LE).add(FloatVector.fromMemorySegment(S, b, bo + cb, LE))
                    .intoMemorySegment(out, o + cb, LE);
        }
        for (; c < C; c++) {
            long cb = (long) c * Float.BYTES;
            out.set(F32, o + cb, a.get(F32, ao + cb) + b.get(F32, bo + cb));
        }
    }

    /** Every token in {@code [0, V)}, else the first bad one with its position. */
    private static void checkTokens(MemorySegment inp, int B, int T, int V) {
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                int tok = inp.getAtIndex(I32, (long) b * T + t);
                if (tok < 0 || tok >= V) {
                    throw new IllegalArgumentException("inp[b=" + b + ", t=" + t + "] = " + tok
                            + " is not a token id in [0, V=" + V + ")");
                }
            }
        }
    }
}
