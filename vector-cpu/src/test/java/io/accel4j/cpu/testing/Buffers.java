package io.accel4j.cpu.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/** Moving test data between double[] (what the references work on) and fp32/int32 segments (what kernels take). */
public final class Buffers {

    private Buffers() {}

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    /** n values uniform in [−scale, scale), each already an fp32 value (so fp32 and fp64 inputs are identical). */
    public static double[] uniform(SplittableRandom rnd, int n, double scale) {
        double[] x = new double[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) ((rnd.nextDouble() * 2 - 1) * scale);
        }
        return x;
    }

    /** n ints uniform in [0, bound). */
    public static int[] ints(SplittableRandom rnd, int n, int bound) {
        int[] x = new int[n];
        for (int i = 0; i < n; i++) {
            x[i] = rnd.nextInt(bound);
        }
        return x;
    }

    /** A new fp32 segment holding {@code x} rounded to fp32. */
    public static MemorySegment floats(Arena arena, double[] x) {
        MemorySegment s = arena.allocate((long) x.length * Float.BYTES, 64);
        for (int i = 0; i < x.length; i++) {
            s.setAtIndex(F32, i, (float) x[i]);
        }
        return s;
    }

    /** A new int32 segment holding {@code x}. */
    public static MemorySegment ints(Arena arena, int[] x) {
        MemorySegment s = arena.allocate((long) x.length * Integer.BYTES, 64);
        for (int i = 0; i < x.length; i++) {
            s.setAtIndex(I32, i, x[i]);
        }
        return s;
    }

    /** A new fp32 segment of n NaNs: an output a kernel must overwrite entirely. */
    public static MemorySegment poisoned(Arena arena, long n) {
        MemorySegment s = arena.allocate(n * Float.BYTES, 64);
        poison(s);
        return s;
    }

    /** Fills the segment with NaN. */
    public static void poison(MemorySegment s) {
        for (long i = 0; i < s.byteSize() / Float.BYTES; i++) {
            s.setAtIndex(F32, i, Float.NaN);
        }
    }

    /** The first n fp32 values of a segment, widened to double. */
    public static double[] read(MemorySegment s, int n) {
        double[] x = new double[n];
        for (int i = 0; i < n; i++) {
            x[i] = s.getAtIndex(F32, i);
        }
        return x;
    }

    /** The values rounded to fp32 and back: what an fp32 kernel sees of a double input. */
    public static double[] roundToFloat(double[] x) {
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = (float) x[i];
        }
        return r;
    }
}
