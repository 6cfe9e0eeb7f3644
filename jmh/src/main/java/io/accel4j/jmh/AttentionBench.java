package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.FlashAttention;
import io.accel4j.cpu.ops.NaiveAttention;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Causal self-attention, fp32, B = 1, head size 64: {@link FlashAttention} (FlashAttention-2 tiles, no T×T
 * scores) against {@link NaiveAttention} (the baseline: llm.c's algorithm, T×T scores per head), forward alone
 * and forward + backward, on 1 and 2 threads; and the flash kernel with BF16 operands (the rounding of
 * {@link io.accel4j.core.ops.AttentionOps}' BF16 mode) against the fp32 flash kernel. {@code shape} is T with NH = 4 heads, or {@code TxNH}.
 *
 * <p>Score: calls per second. FLOPs per call, counting only the products (exp, max and sums are free):
 * forward {@code 4·B·NH·T²·hs / 2} (Q·Kᵀ and P·V, each 2·T²·hs per head, halved by the causal mask); backward
 * 2.5× the forward (five products instead of two), so forward + backward is {@code 3.5 × forward}. GFLOP/s =
 * score · FLOPs / 10⁹; e.g. T = 1024, NH = 4: forward 0.537 GFLOP, forward + backward 1.879 GFLOP.
 *
 * <p>{@code gemm} is the yardstick of "our fp32 GEMM at a comparable size": NH products of the size of attention's
 * first one, {@code S (T×T) = Q_h (T×hs) · K_hᵀ}, read from the same qkv buffer (layout NT, lda = 3C), without a
 * mask: {@code 2·NH·T²·hs} FLOPs per call.
 *
 * <p>Backward adds into dqkv ({@code +=}); the buffer is not reset between calls (the values only grow linearly,
 * and resetting would add traffic the kernels do not have).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(1)
@State(Scope.Benchmark)
public class AttentionBench {

    static final int HEAD_SIZE = 64;

    @Param({"256", "512", "1024", "2048", "1024x12"})
    public String shape;

    @Param({"1", "2"})
    public int threads;

    private int B;
    private int T;
    private int C;
    private int NH;
    private Parallel pool;
    private Arena arena;
    private MemorySegment qkv;
    private MemorySegment out;
    private MemorySegment lse;
    private MemorySegment dout;
    private MemorySegment dqkv;
    private MemorySegment scores;

    @Setup(Level.Trial)
    public void setup() {
        String[] p = shape.split("x");
        B = 1;
        T = Integer.parseInt(p[0]);
        NH = p.length > 1 ? Integer.parseInt(p[1]) : 4;
        C = NH * HEAD_SIZE;
        pool = new Parallel(threads);
        arena = Arena.ofShared();
        SplittableRandom rnd = new SplittableRandom(42);
        qkv = random(arena, (long) B * T * 3 * C, rnd);
        dout = random(arena, (long) B * T * C, rnd);
        out = arena.allocate((long) B * T * C * Float.BYTES, 64);
        lse = arena.allocate((long) B * NH * T * Float.BYTES, 64);
        dqkv = arena.allocate(qkv.byteSize(), 64);
        scores = arena.allocate((long) T * T * Float.BYTES, 64);
    }

    /** n floats uniform in [−1, 1), 64-byte aligned. */
    static MemorySegment random(Arena arena, long n, SplittableRandom rnd) {
        MemorySegment s = arena.allocate(n * Float.BYTES, 64);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) (rnd.nextDouble() * 2 - 1));
        }
        return s;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** FLOPs per call, as counted above: flash is compared with naive, {@code gemm} stands alone. */
    public static Work work(String method, Map<String, String> params) {
        String[] p = params.get("shape").split("x");
        double T = Double.parseDouble(p[0]), NH = p.length > 1 ? Double.parseDouble(p[1]) : 4;
        double forward = 4 * NH * T * T * HEAD_SIZE / 2;
        return switch (method) {
            case "naiveForward" -> Work.flops(forward, null);
            case "flashForward" -> Work.flops(forward, "naiveForward");
            case "naiveForwardBackward" -> Work.flops(3.5 * forward, null);
            case "flashForwardBackward" -> Work.flops(3.5 * forward, "naiveForwardBackward");
            case "flashBf16Forward" -> Work.flops(forward, "flashForward");
            case "flashBf16ForwardBackward" -> Work.flops(3.5 * forward, "flashForwardBackward");
            case "gemm" -> Work.flops(2 * NH * T * T * HEAD_SIZE, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    /** NH GEMMs {@code S = Q_h·K_hᵀ} (T×T×hs) on the pool: the GEMM rate at attention's size. */
    @Benchmark
    public void gemm() {
        for (int h = 0; h < NH; h++) {
            Gemm.gemm(pool, Layout.NT, T, T, HEAD_SIZE, 1f, qkv.asSlice((long) h * HEAD_SIZE * 4), DType.FP32, 3 * C,
                    1f, qkv.asSlice((long) (C + h * HEAD_SIZE) * 4), DType.FP32, 3 * C, 1f, 0f, scores, DType.FP32,
                    T, null);
        }
    }

    @Benchmark
    public void naiveForward() {
        NaiveAttention.forward(pool, out, lse, qkv, B, T, C, NH);
    }

    @Benchmark
    public void flashForward() {
        FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH);
    }

    @Benchmark
    public void naiveForwardBackward() {
        NaiveAttention.forward(pool, out, lse, qkv, B, T, C, NH);
        NaiveAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
    }

    @Benchmark
    public void flashForwardBackward() {
        FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH);
        FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH);
    }

    /** {@link #flashForward} with BF16 operands ({@code --precision bf16}'s attention), beside the fp32 flash. */
    @Benchmark
    public void flashBf16Forward() {
        FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH, DType.BF16);
    }

    /** {@link #flashForwardBackward} with BF16 operands, beside the fp32 flash. */
    @Benchmark
    public void flashBf16ForwardBackward() {
        FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH, DType.BF16);
        FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, DType.BF16);
    }
}
