package io.accel4j.core;

/**
 * A counter-based random generator: the bits for element {@code index} are a pure function of {@code (seed, index)},
 * so a bulk operation gives the same result however it is split into chunks, threads or devices.
 *
 * <p>It is SplitMix64 ({@link java.util.SplittableRandom}'s generator) read at a position instead of stepped:
 * <pre>
 *   z = seed + (index + 1) · 0x9E3779B97F4A7C15          (mod 2^64; the golden-ratio "gamma")
 *   z = (z ^ (z >>> 30)) · 0xBF58476D1CE4E5B9
 *   z = (z ^ (z >>> 27)) · 0x94D049BB133111EB
 *   z =  z ^ (z >>> 31)                                   (Stafford's "mix13" finaliser)
 *   bits = (int) (z >>> 32)                               (the high 32 bits)
 * </pre>
 * so {@code bits(seed, i)} is the high half of the {@code (i+1)}-th {@code nextLong()} of
 * {@code new SplittableRandom(seed)}. SplitMix64 passes BigCrush. Two seeds that differ by {@code k·gamma} give the
 * same stream shifted by {@code k} elements; for seeds that differ by less than 2^20 (counted-up seeds) that shift is
 * at least 2^42, so such streams do not overlap in practice. The GPU kernels (stochastic-rounding AdamW) are to use
 * the same function with 64-bit integer arithmetic, so CPU and GPU runs agree.
 */
public final class CounterRng {

    /** SplitMix64's increment, 2^64 / φ rounded to odd. */
    public static final long GAMMA = 0x9E37_79B9_7F4A_7C15L;

    private CounterRng() {}

    /** 32 random bits for element {@code index} of the stream {@code seed}. */
    public static int bits(long seed, long index) {
        return (int) (mix64(seed + (index + 1) * GAMMA) >>> 32);
    }

    /** SplitMix64's finaliser: a bijection on 64-bit values with full avalanche. */
    public static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }
}
