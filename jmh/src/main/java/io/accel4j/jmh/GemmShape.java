package io.accel4j.jmh;

import io.accel4j.cpu.gemm.Layout;
import java.util.Locale;

/**
 * A GEMM problem size as the benchmarks name it in their {@code shape} parameter: {@code C (M×N) = op(A)·op(B)}.
 *
 * <ul>
 *   <li>{@code "1024"}: the square 1024³ product, layout NN;</li>
 *   <li>{@code "gpt2-fwd"}: GPT-2 small's MLP up-projection forward, {@code out(B·T, 4C) = inp(B·T, C)·Wᵀ}, with
 *       B·T = 1024, C = 768: M=1024, N=3072, K=768, NT (W stored N×K);</li>
 *   <li>{@code "gpt2-dinp"}: its input gradient {@code dinp(B·T, C) = dout(B·T, 4C)·W}: M=1024, N=768, K=3072, NN;</li>
 *   <li>{@code "gpt2-dw"}: its weight gradient {@code dW(4C, C) = doutᵀ·inp}: M=3072, N=768, K=1024, TN
 *       (A = dout stored K×M);</li>
 *   <li>{@code "lm-fwd"}, {@code "lm-dinp"}, {@code "lm-dw"}: the tied LM head of the training step
 *       ({@code accel4j bench train}: B·T = 256, C = 256, Vp = 50304), which dominates it:
 *       {@code logits(B·T, Vp) = inp·Wᵀ}: M=256, N=50304, K=256, NT; {@code dinp = dlogits·W}: M=256, N=256,
 *       K=50304, NN (a long reduction); {@code dW(Vp, C) = dlogitsᵀ·inp}: M=50304, N=256, K=256, TN;</li>
 *   <li>{@code "MxNxK"} or {@code "MxNxK:LAYOUT"} (e.g. {@code 768x768x3072:NT}): anything else, for {@code -p shape=…}.</li>
 * </ul>
 * Every operand is packed: the leading dimensions are the stored column counts.
 */
public record GemmShape(String name, int M, int N, int K, Layout layout) {

    /** The training step's LM head: B·T rows, C channels, the padded vocabulary Vp. */
    private static final int LM_ROWS = 256, LM_CHANNELS = 256, LM_VOCAB = 50304;

    public GemmShape {
        if (M < 1 || N < 1 || K < 1) {
            throw new IllegalArgumentException("shape '" + name + "': M, N, K must be >= 1, got " + M + "x" + N + "x" + K);
        }
    }

    /** Parses a {@code shape} parameter value (see the class comment). */
    public static GemmShape parse(String shape) {
        String s = shape.trim().toLowerCase(Locale.ROOT);
        switch (s) {
            case "gpt2-fwd":
                return new GemmShape(shape, 1024, 3072, 768, Layout.NT);
            case "gpt2-dinp":
                return new GemmShape(shape, 1024, 768, 3072, Layout.NN);
            case "gpt2-dw":
                return new GemmShape(shape, 3072, 768, 1024, Layout.TN);
            case "lm-fwd":
                return new GemmShape(shape, LM_ROWS, LM_VOCAB, LM_CHANNELS, Layout.NT);
            case "lm-dinp":
                return new GemmShape(shape, LM_ROWS, LM_CHANNELS, LM_VOCAB, Layout.NN);
            case "lm-dw":
                return new GemmShape(shape, LM_VOCAB, LM_CHANNELS, LM_ROWS, Layout.TN);
            default:
                break;
        }
        String dims = s;
        Layout layout = Layout.NN;
        int colon = s.indexOf(':');
        if (colon >= 0) {
            dims = s.substring(0, colon);
            String l = s.substring(colon + 1).toUpperCase(Locale.ROOT);
            layout = java.util.Arrays.stream(Layout.values()).filter(x -> x.name().equals(l)).findFirst()
                    .orElseThrow(() -> unknown(shape));
        }
        String[] p = dims.split("x", -1);
        if (p.length == 1 && colon < 0) {
            int n = dim(p[0], shape);
            return new GemmShape(shape, n, n, n, Layout.NN);
        }
        if (p.length == 3) {
            return new GemmShape(shape, dim(p[0], shape), dim(p[1], shape), dim(p[2], shape), layout);
        }
        throw unknown(shape);
    }

    private static int dim(String d, String shape) {
        if (d.isEmpty() || !d.chars().allMatch(Character::isDigit)) {
            throw unknown(shape);
        }
        try {
            return Integer.parseInt(d);
        } catch (NumberFormatException e) {
            throw unknown(shape);
        }
    }

    private static IllegalArgumentException unknown(String shape) {
        return new IllegalArgumentException("unknown GEMM shape '" + shape
                + "': use N (square, NN), gpt2-fwd, gpt2-dinp, gpt2-dw, lm-fwd, lm-dinp, lm-dw, or MxNxK[:NN|NT|TN|TT]");
    }

    /** Floating-point operations of one product: 2·M·N·K (a multiply and an add per term). */
    public double flops() {
        return 2.0 * M * N * K;
    }

    /** Leading dimension of A as stored (packed). */
    public int lda() {
        return layout.storedColsA(M, K);
    }

    /** Leading dimension of B as stored (packed). */
    public int ldb() {
        return layout.storedColsB(K, N);
    }

    /** Leading dimension of C. */
    public int ldc() {
        return N;
    }

    /** Elements of A as stored. */
    public long sizeA() {
        return (long) layout.storedRowsA(M, K) * lda();
    }

    /** Elements of B as stored. */
    public long sizeB() {
        return (long) layout.storedRowsB(K, N) * ldb();
    }

    /** Elements of C. */
    public long sizeC() {
        return (long) M * N;
    }

    /** {@code 1024x3072x768 NT}. */
    public String describe() {
        return M + "x" + N + "x" + K + " " + layout;
    }
}
