package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.ops.FlashAttention;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@link FlashAttention} and its yardstick, our fp32 GEMM on attention's first product ({@link AttentionBench}'s
 * {@code gemm}: per head {@code S = Q_h·K_hᵀ}, T×T×hs, NT, lda 3C, no mask), taking turns of {@code seconds} in one
 * JVM, as {@link GemmInterleaved} does for the GEMM against OpenBLAS: on a loaded machine the median of the per-round
 * ratios is the figure to compare, and on one thread its per-CPU-second form hardly moves with the load.
 *
 * <pre>
 *   java --add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED -cp jmh/target/benchmarks.jar \
 *       io.accel4j.jmh.AttentionInterleaved [T=64] [B=4] [NH=4] [pass=fwd|fwdbwd] [threads=1] [rounds=8] \
 *       [seconds=1] [warmup=3]
 * </pre>
 * Head size 64. FLOPs are {@link AttentionBench}'s causal count, {@code 2·B·NH·T²·hs} forward (two products, half
 * masked), 3.5× that forward + backward; the GEMM's {@code 2·B·NH·T²·hs} (every head of every sequence).
 */
public final class AttentionInterleaved {

    private static final List<String> OPTIONS = List.of("T", "B", "NH", "pass", "threads", "rounds", "seconds",
            "warmup");
    private static final String USAGE = "usage: AttentionInterleaved [T=64] [B=4] [NH=4] [pass=fwd|fwdbwd]"
            + " [threads=1] [rounds=8] [seconds=1] [warmup=3]";
    private static final int HS = AttentionBench.HEAD_SIZE;

    private AttentionInterleaved() {}

    public static void main(String[] args) {
        Turns.Args a = new Turns.Args("AttentionInterleaved", USAGE, args, OPTIONS);
        int T = (int) a.positive("T", "64", true);
        int B = (int) a.positive("B", "4", true);
        int NH = (int) a.positive("NH", "4", true);
        String pass = a.text("pass", "fwd");
        if (!pass.equals("fwd") && !pass.equals("fwdbwd")) {
            throw a.error("pass must be fwd or fwdbwd, got '" + pass + "'");
        }
        boolean backward = pass.equals("fwdbwd");
        int threads = (int) a.positive("threads", "1", true);
        int rounds = (int) a.positive("rounds", "8", true);
        double seconds = a.positive("seconds", "1", false);
        double warmup = a.positive("warmup", "3", false);
        int C = NH * HS;
        double forwardFlops = 2.0 * B * NH * T * T * HS;
        double attFlops = backward ? 3.5 * forwardFlops : forwardFlops;
        double gemmFlops = 2.0 * B * NH * T * T * HS;

        try (Arena arena = Arena.ofShared(); Parallel pool = new Parallel(threads)) {
            SplittableRandom rnd = new SplittableRandom(42);
            MemorySegment qkv = AttentionBench.random(arena, (long) B * T * 3 * C, rnd);
            MemorySegment dout = AttentionBench.random(arena, (long) B * T * C, rnd);
            MemorySegment out = arena.allocate((long) B * T * C * Float.BYTES, 64);
            MemorySegment lse = arena.allocate((long) B * NH * T * Float.BYTES, 64);
            MemorySegment dqkv = arena.allocate(qkv.byteSize(), 64);
            MemorySegment scores = arena.allocate((long) T * T * Float.BYTES, 64);
            Runnable attention = () -> {
                FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH);
                if (backward) {
                    FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
                }
            };
            Runnable gemm = () -> {
                for (int b = 0; b < B; b++) {
                    for (int h = 0; h < NH; h++) {
                        long q = ((long) b * T * 3 * C + (long) h * HS) * Float.BYTES;
                        Gemm.gemm(pool, Layout.NT, T, T, HS, 1f, qkv.asSlice(q), DType.FP32, 3 * C, 1f,
                                qkv.asSlice(q + (long) C * Float.BYTES), DType.FP32, 3 * C, 1f, 0f, scores,
                                DType.FP32, T, null);
                    }
                }
            };
            System.out.printf(Locale.ROOT, "attention %s B %d NH %d T %d hs %d, %d thread(s), %d rounds of %.1f s;"
                    + " ratio = attention GFLOP/s / GEMM GFLOP/s%n", pass, B, NH, T, HS, threads, rounds, seconds);
            Turns.compare("attention", attention, attFlops, "gemm", gemm, gemmFlops, rounds, seconds, warmup);
        }
    }
}
