package io.accel4j.train.io;

import java.util.Arrays;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;

/**
 * Mutations of a valid file for the parser fuzz tests: set one of the first 64 little-endian int32 (the header
 * fields every format here starts with) to an interesting value (0, ±1, the magic numbers, the int extremes, …) or
 * any int, set a byte anywhere, truncate, append bytes. jqwik draws one to four per try, edge cases first, and
 * prints the seed that reproduces a failure.
 */
public final class Mutations {

    private Mutations() {}

    /** One mutation: {@code kind} 0 int32 field, 1 byte, 2 truncate, 3 append; its position and value. */
    public record Mutation(int kind, int at, int value) {}

    /** Values that sit on the edges of the checks: zero, signs, small sizes, the formats' magic numbers, extremes. */
    private static final Integer[] INTERESTING = {0, 1, -1, 2, 3, 4, 5, 8, 16, 64, 255, 256, 257, 1024, 65535, 65536,
        1 << 20, 1 << 30, Integer.MAX_VALUE, Integer.MAX_VALUE - 1, Integer.MIN_VALUE, 20240326, 20241203, 20240520,
        0x4134_444C, 0x7fc00000, 0x3f800000, 0x47800000};

    /** One to four mutations. */
    public static Arbitrary<List<Mutation>> mutations() {
        Arbitrary<Integer> values = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(3, Arbitraries.of(INTERESTING)), net.jqwik.api.Tuple.of(1,
                        Arbitraries.integers()));
        Arbitrary<Mutation> field = Combinators.combine(Arbitraries.integers().between(0, 63), values)
                .as((k, v) -> new Mutation(0, k, v));
        Arbitrary<Mutation> oneByte = Combinators.combine(Arbitraries.integers().between(0, 1 << 20),
                Arbitraries.integers().between(0, 255)).as((i, v) -> new Mutation(1, i, v));
        Arbitrary<Mutation> truncate = Arbitraries.integers().between(0, 1 << 20).map(n -> new Mutation(2, n, 0));
        Arbitrary<Mutation> append = Arbitraries.integers().between(1, 64).map(n -> new Mutation(3, n, 0));
        return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(4, field), net.jqwik.api.Tuple.of(2, oneByte),
                net.jqwik.api.Tuple.of(1, truncate), net.jqwik.api.Tuple.of(1, append)).list().ofMinSize(1)
                .ofMaxSize(4);
    }

    /** {@code valid} with {@code ms} applied in order (positions taken modulo the current length). */
    public static byte[] apply(byte[] valid, List<Mutation> ms) {
        byte[] b = valid.clone();
        for (Mutation m : ms) {
            switch (m.kind()) {
                case 0 -> {
                    int at = 4 * m.at();
                    for (int i = 0; i < 4 && at + i < b.length; i++) {
                        b[at + i] = (byte) (m.value() >>> (8 * i));
                    }
                }
                case 1 -> {
                    if (b.length > 0) {
                        b[m.at() % b.length] = (byte) m.value();
                    }
                }
                case 2 -> b = Arrays.copyOf(b, m.at() % (b.length + 1));
                default -> {
                    int n = b.length;
                    b = Arrays.copyOf(b, n + m.at());
                    for (int i = n; i < b.length; i++) {
                        b[i] = (byte) (i * 31 + m.at());
                    }
                }
            }
        }
        return b;
    }
}
