package io.accel4j.train.data;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The 32-bit Mersenne Twister MT19937 (Matsumoto &amp; Nishimura 1998), the generator of {@code std::mt19937},
 * PyTorch's CPU generator and llm.c's {@code llmc/rand.h}: seeded by {@code init_genrand} (the 1812433253
 * recurrence), outputs tempered as in the reference code. Seed 5489 gives 3499211612 first and 4123659995 as the
 * 10000th output.
 *
 * <p>On top of the raw outputs, llm.c's (= PyTorch's) conversions: {@link #nextFloat} ({@code randfloat32}),
 * {@link #nextDouble} ({@code randfloat64}) and {@link #normal} ({@code normal_}, Box–Muller), so that a model
 * initialised here from seed 42 is llm.c's {@code gpt2_build_from_random} model. The float math follows llm.c
 * operation by operation; {@code logf}, {@code sinf} and {@code cosf} become the correctly rounded double functions
 * rounded to float, which agree with glibc's float functions except perhaps in the last bit.
 *
 * <p>Not thread-safe. The whole state is {@link #state()} (625 ints) and comes back with {@link #fromState}.
 */
public final class Mt19937 {

    private static final int N = 624;
    private static final int M = 397;
    private static final int MATRIX_A = 0x9908_b0df;
    private static final int UPPER = 0x8000_0000;
    private static final int LOWER = 0x7fff_ffff;
    private static final float EPS = 1e-12f;

    private final int[] mt = new int[N];
    private int index;

    /** A generator seeded with {@code init_genrand(seed)}; the seed is an unsigned 32-bit value, 0..2^32−1. */
    public Mt19937(long seed) {
        if (seed < 0 || seed > 0xFFFF_FFFFL) {
            throw new IllegalArgumentException("seed must be in [0, 2^32), got " + seed);
        }
        mt[0] = (int) seed;
        for (int i = 1; i < N; i++) {
            mt[i] = 1812433253 * (mt[i - 1] ^ (mt[i - 1] >>> 30)) + i;
        }
        index = N;
    }

    private Mt19937(int[] state) {
        System.arraycopy(state, 0, mt, 0, N);
        index = state[N];
    }

    /** The next output as 32 raw bits (compare or reduce them unsigned). */
    public int nextInt() {
        if (index >= N) {
            twist();
        }
        int y = mt[index++];
        y ^= y >>> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >>> 18;
        return y;
    }

    /** The next output as an unsigned value in {@code [0, 2^32)}. */
    public long nextUint32() {
        return Integer.toUnsignedLong(nextInt());
    }

    /** llm.c's {@code randfloat32}: the low 24 bits of one output times 2^−24, in {@code [0, 1)}. */
    public float nextFloat() {
        return (nextInt() & 0xFF_FFFF) * (1.0f / (1 << 24));
    }

    /**
     * llm.c's {@code randfloat64}: two outputs, the first the high 32 bits, the low 53 bits of the 64 times 2^−53
     * (PyTorch's {@code random64}).
     */
    public double nextDouble() {
        long hi = nextUint32();
        long lo = nextUint32();
        return (((hi << 32) | lo) & ((1L << 53) - 1)) * 0x1p-53;
    }

    private void twist() {
        int i = 0;
        for (; i < N - M; i++) {
            int y = (mt[i] & UPPER) | (mt[i + 1] & LOWER);
            mt[i] = mt[i + M] ^ (y >>> 1) ^ ((y & 1) == 0 ? 0 : MATRIX_A);
        }
        for (; i < N - 1; i++) {
            int y = (mt[i] & UPPER) | (mt[i + 1] & LOWER);
            mt[i] = mt[i + (M - N)] ^ (y >>> 1) ^ ((y & 1) == 0 ? 0 : MATRIX_A);
        }
        int y = (mt[N - 1] & UPPER) | (mt[0] & LOWER);
        mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ ((y & 1) == 0 ? 0 : MATRIX_A);
        index = 0;
    }

    /**
     * llm.c's {@code normal_(data, n, mean, std)}: writes {@code n} normal samples as fp32 (native byte order) at
     * element {@code offset} of {@code out}. For {@code n >= 16} the Box–Muller transform runs on blocks of 16
     * {@link #nextFloat} uniforms (8 radii from the first half, 8 angles from the second, giving cos then sin); when
     * {@code n} is not a multiple of 16 the uniforms of the partial block are drawn and dropped and the last 16
     * values are recomputed from 16 fresh uniforms, as llm.c does. For {@code n < 16}, pairs from
     * {@link #nextDouble} uniforms.
     */
    public void normal(MemorySegment out, long offset, long n, float mean, float std) {
        if (n < 0 || offset < 0) {
            throw new IllegalArgumentException("offset and n must be >= 0, got " + offset + ", " + n);
        }
        if (n < 16) {
            normalSmall(out, offset, (int) n, mean, std);
            return;
        }
        float[] block = new float[16];
        long groups = n / 16;
        for (long g = 0; g < groups; g++) {
            for (int t = 0; t < 16; t++) {
                block[t] = nextFloat();
            }
            fill16(block, mean, std);
            MemorySegment.copy(block, 0, out, ValueLayout.JAVA_FLOAT_UNALIGNED, (offset + g * 16) * Float.BYTES, 16);
        }
        int rest = (int) (n % 16);
        if (rest != 0) {
            for (int t = 0; t < rest; t++) {
                nextFloat(); // llm.c draws them for the tail, then overwrites the tail
            }
            for (int t = 0; t < 16; t++) {
                block[t] = nextFloat();
            }
            fill16(block, mean, std);
            MemorySegment.copy(block, 0, out, ValueLayout.JAVA_FLOAT_UNALIGNED, (offset + n - 16) * Float.BYTES, 16);
        }
    }

    /** {@link #normal(MemorySegment, long, long, float, float)} into an array. */
    public void normal(float[] out, int offset, int n, float mean, float std) {
        normal(MemorySegment.ofArray(out), offset, n, mean, std);
    }

    /** llm.c's {@code normal_fill_16}, in place. */
    private static void fill16(float[] d, float mean, float std) {
        for (int t = 0; t < 8; t++) {
            float u1 = 1 - d[t];
            float u2 = d[t + 8];
            float radius = (float) Math.sqrt(-2f * logf(u1 + EPS));
            float theta = (float) (2.0 * Math.PI * u2);
            d[t] = radius * cosf(theta) * std + mean;
            d[t + 8] = radius * sinf(theta) * std + mean;
        }
    }

    private void normalSmall(MemorySegment out, long offset, int n, float mean, float std) {
        double next = 0;
        boolean hasNext = false;
        for (int t = 0; t < n; t++) {
            float v;
            if (hasNext) {
                v = (float) (next * std + mean);
                hasNext = false;
            } else {
                float u1 = (float) nextDouble();
                float u2 = (float) nextDouble();
                float radius = (float) Math.sqrt(-2f * logf(1 - u2 + EPS));
                float theta = (float) (2.0 * Math.PI * u1);
                next = radius * sinf(theta);
                hasNext = true;
                v = radius * cosf(theta) * std + mean;
            }
            out.set(ValueLayout.JAVA_FLOAT_UNALIGNED, (offset + t) * Float.BYTES, v);
        }
    }

    private static float logf(float x) {
        return (float) Math.log(x);
    }

    private static float sinf(float x) {
        return (float) Math.sin(x);
    }

    private static float cosf(float x) {
        return (float) Math.cos(x);
    }

    /** The whole state: the 624 words, then the index of the next word to temper (624: twist first). */
    public int[] state() {
        int[] s = new int[N + 1];
        System.arraycopy(mt, 0, s, 0, N);
        s[N] = index;
        return s;
    }

    /** A generator continuing from {@link #state()}; the array must have 625 entries, the last in [0, 624]. */
    public static Mt19937 fromState(int[] state) {
        if (state.length != N + 1) {
            throw new IllegalArgumentException("an MT19937 state has " + (N + 1) + " ints, got " + state.length);
        }
        if (state[N] < 0 || state[N] > N) {
            throw new IllegalArgumentException("MT19937 state index must be in [0, " + N + "], got " + state[N]);
        }
        return new Mt19937(state);
    }

    /** An independent copy continuing from the same point. */
    public Mt19937 copy() {
        return new Mt19937(state());
    }
}
