package io.accel4j.collectives;

import io.accel4j.cpu.Simd;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The element-wise fp32 loops of the reductions, on little-endian buffers at byte offsets. One hot loop per method,
 * written once for every width; {@link Simd#SCALAR} takes the tail loop only. Element-wise, so the vector and scalar
 * paths give bit-identical results.
 */
final class Reduce {

    private static final VectorSpecies<Float> F = Simd.FLOAT;
    private static final int L = Simd.SCALAR ? 1 : F.length();
    private static final boolean VECTOR = !Simd.SCALAR;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private Reduce() {}

    /** {@code acc[i] ← op(acc[i], in[i])} for {@code i < n} ({@link ReduceOp#AVG} adds; divide later). */
    static void combine(ReduceOp op, MemorySegment acc, long accOff, MemorySegment in, long inOff, long n) {
        if (op == ReduceOp.MAX) {
            max(acc, accOff, in, inOff, n);
        } else {
            add(acc, accOff, in, inOff, n);
        }
    }

    /** {@code acc[i] ← acc[i] + in[i]}. */
    static void add(MemorySegment acc, long accOff, MemorySegment in, long inOff, long n) {
        long i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                FloatVector a = FloatVector.fromMemorySegment(F, acc, accOff + i * 4, LE);
                FloatVector b = FloatVector.fromMemorySegment(F, in, inOff + i * 4, LE);
                a.add(b).intoMemorySegment(acc, accOff + i * 4, LE);
            }
        }
        for (; i < n; i++) {
            acc.set(F32, accOff + i * 4, acc.get(F32, accOff + i * 4) + in.get(F32, inOff + i * 4));
        }
    }

    /** {@code acc[i] ← max(acc[i], in[i])}, as {@link Math#max(float, float)}. */
    static void max(MemorySegment acc, long accOff, MemorySegment in, long inOff, long n) {
        long i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                FloatVector a = FloatVector.fromMemorySegment(F, acc, accOff + i * 4, LE);
                FloatVector b = FloatVector.fromMemorySegment(F, in, inOff + i * 4, LE);
                a.max(b).intoMemorySegment(acc, accOff + i * 4, LE);
            }
        }
        for (; i < n; i++) {
            acc.set(F32, accOff + i * 4, Math.max(acc.get(F32, accOff + i * 4), in.get(F32, inOff + i * 4)));
        }
    }

    /** {@code x[i] ← x[i] / d} (one fp32 division, as {@link ReduceOp#AVG} defines). */
    static void divide(MemorySegment x, long off, long n, float d) {
        long i = 0;
        if (VECTOR) {
            for (long bound = n - n % L; i < bound; i += L) {
                FloatVector.fromMemorySegment(F, x, off + i * 4, LE).div(d).intoMemorySegment(x, off + i * 4, LE);
            }
        }
        for (; i < n; i++) {
            x.set(F32, off + i * 4, x.get(F32, off + i * 4) / d);
        }
    }
}
