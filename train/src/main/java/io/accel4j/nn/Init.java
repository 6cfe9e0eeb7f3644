package io.accel4j.nn;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;

/**
 * How a parameter tensor starts: a constant, a normal or a uniform distribution. Each tensor draws from its own
 * stream, seeded by the run's seed and the tensor's name, so a tensor's values do not depend on what else the network
 * holds or in which order it was declared.
 */
public sealed interface Init {

    /** Every element {@code value}. */
    record Constant(float value) implements Init {}

    /** Normal with mean 0 and standard deviation {@code std}. */
    record Normal(double std) implements Init {}

    /** Uniform in {@code [−bound, bound)}. */
    record Uniform(double bound) implements Init {}

    static Init zeros() {
        return new Constant(0f);
    }

    static Init ones() {
        return new Constant(1f);
    }

    static Init normal(double std) {
        return new Normal(std);
    }

    /** PyTorch's default for a linear layer of {@code fanIn} inputs: U(−1/√fanIn, 1/√fanIn). */
    static Init fanIn(long fanIn) {
        return new Uniform(1 / Math.sqrt(fanIn));
    }

    /** Fills {@code count} fp32 values of host segment {@code dst} for tensor {@code name} of a run seeded {@code seed}. */
    default void fill(MemorySegment dst, long count, String name, long seed) {
        long h = seed * 0x9E3779B97F4A7C15L;
        for (byte c : name.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ c) * 0x100000001B3L;
        }
        SplittableRandom r = new SplittableRandom(h);
        for (long i = 0; i < count; i++) {
            float v = switch (this) {
                case Constant k -> k.value();
                case Normal n -> (float) (n.std() * r.nextGaussian());
                case Uniform u -> (float) (u.bound() * (2 * r.nextDouble() - 1));
            };
            dst.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, v);
        }
    }
}
