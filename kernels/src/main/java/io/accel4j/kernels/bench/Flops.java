package io.accel4j.kernels.bench;

/**
 * The work counted per call, by the conventions the published figures use, so that ours compare with them.
 *
 * <p>Attention (FlashAttention's benchmarks): the forward is two matmuls of B·NH·T²·hd multiply-adds each
 * ({@code S = Q·Kᵀ}, {@code O = P·V}), 4·B·NH·T²·hd FLOP, halved for causal (half the scores are masked); the softmax
 * is not counted. The backward is 2.5× the forward (five matmuls instead of two), the forward and backward 3.5×.
 * GEMM: 2·M·N·K. Element-wise kernels are counted in bytes moved (see {@link #adamwBytes}).
 */
public final class Flops {

    private Flops() {}

    /** 4·B·NH·T²·hd, halved when causal. */
    public static double attentionForward(int B, int NH, int T, int hd, boolean causal) {
        positive("B", B); positive("NH", NH); positive("T", T); positive("hd", hd);
        double f = 4.0 * B * NH * (double) T * T * hd;
        return causal ? f / 2 : f;
    }

    /** 2.5× the forward. */
    public static double attentionBackward(int B, int NH, int T, int hd, boolean causal) {
        return 2.5 * attentionForward(B, NH, T, hd, causal);
    }

    /** Forward then backward: 3.5× the forward. */
    public static double attentionForwardBackward(int B, int NH, int T, int hd, boolean causal) {
        return attentionForward(B, NH, T, hd, causal) + attentionBackward(B, NH, T, hd, causal);
    }

    /** 2·M·N·K. */
    public static double gemm(long M, long N, long K) {
        positive("M", M); positive("N", N); positive("K", K);
        return 2.0 * M * N * K;
    }

    /**
     * Bytes AdamW moves per call over n fp32 parameters: reads params, grads, m, v and writes params, m, v (7·4·n);
     * with {@code bf16Copy} (fp32 master weights and a bf16 copy) also writes 2·n bytes.
     */
    public static double adamwBytes(long n, boolean bf16Copy) {
        positive("n", n);
        return 28.0 * n + (bf16Copy ? 2.0 * n : 0);
    }

    /** Bytes a device-to-device copy of {@code bytes} moves: read once, written once. */
    public static double copyBytes(long bytes) {
        positive("bytes", bytes);
        return 2.0 * bytes;
    }

    private static void positive(String name, long v) {
        if (v < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + v);
        }
    }
}
