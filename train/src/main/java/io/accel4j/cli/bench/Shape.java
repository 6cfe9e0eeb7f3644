package io.accel4j.cli.bench;

import java.util.Locale;

/** A GEMM shape: op(A) is M×K, op(B) is K×N. Written {@code N} (a cube) or {@code MxNxK}. */
record Shape(int m, int n, int k) {

    /** The largest side accepted: a 65536² fp32 operand is already 16 GiB. */
    static final long MAX_SIDE = 1 << 16;

    /** Parses {@code 512} or {@code 256x1024x512} (also with {@code X} or {@code ×}). */
    static Shape parse(String text) {
        String s = text.strip().toLowerCase(Locale.ROOT).replace('×', 'x');
        String[] parts = s.split("x", -1);
        if (parts.length != 1 && parts.length != 3) {
            throw bad(text);
        }
        int[] v = new int[3];
        for (int i = 0; i < parts.length; i++) {
            try {
                v[i] = Integer.parseInt(parts[i].strip());
            } catch (NumberFormatException e) {
                throw bad(text);
            }
            if (v[i] < 1 || v[i] > MAX_SIDE) {
                throw new IllegalArgumentException("'" + text + "': every side must be between 1 and " + MAX_SIDE);
            }
        }
        return parts.length == 1 ? new Shape(v[0], v[0], v[0]) : new Shape(v[0], v[1], v[2]);
    }

    private static IllegalArgumentException bad(String text) {
        return new IllegalArgumentException("'" + text + "' is not a size: expected N or MxNxK, e.g. 512 or 256x1024x512");
    }

    /** Floating-point operations of one product: 2·M·N·K. */
    double flops() {
        return 2.0 * m * n * k;
    }

    int largestSide() {
        return Math.max(m, Math.max(n, k));
    }

    @Override
    public String toString() {
        return m + "x" + n + "x" + k;
    }

    /** picocli's converter; its message becomes the usage error. */
    static final class Converter extends ParsingConverter<Shape> {
        Converter() {
            super(Shape::parse);
        }
    }
}
