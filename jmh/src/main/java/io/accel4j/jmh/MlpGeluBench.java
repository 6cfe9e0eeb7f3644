package io.accel4j.jmh;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.Gelu;
import io.accel4j.cpu.ops.Matmul;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.SplittableRandom;
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
 * The MLP's GELU fused into its matmuls ({@link Matmul#forwardGelu}, {@link Matmul#backwardGelu}) against the
 * unfused ops they replace, at GPT-2 shapes {@code BT × C × H} (H = 4C): the bench config (256 × 256 × 1024)
 * and GPT-2 small at B·T = 1024 (1024 × 768 × 3072).
 * <ul>
 *   <li>{@code forwardFused}: {@code fch = ln·Wfcᵀ + b}, {@code fchGelu = gelu(fch)} in one GEMM;
 *       {@code forwardUnfused} (its baseline): {@link Matmul#forward} then {@link Gelu#forward}.</li>
 *   <li>{@code backwardFused}: the projection's backward (dweight, dbias) with {@code dfch = gelu'(fch)·(dres·Wproj)}
 *       and fc's bias gradient in the dinp GEMM's epilogue; {@code backwardUnfused} (its baseline): dfchGelu zeroed,
 *       {@link Matmul#backward}, dfch zeroed, {@link Gelu#backward}, fc's bias gradient
 *       ({@link Matmul#biasGradient}).</li>
 * </ul>
 * Score: calls per second; GFLOP/s counts the GEMMs only (forward 2·BT·C·H, backward 4·BT·C·H).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Benchmark)
public class MlpGeluBench {

    /** {@code BT x C x H}. */
    @Param({"256x256x1024", "1024x768x3072"})
    public String shape;

    @Param({"1"})
    public int threads;

    private int BT, C, H;
    private Arena arena;
    private Parallel pool;
    private MemorySegment ln, wfc, bfc, fch, fchGelu, wproj, dres, dwproj, dbproj, dfchGelu, dfch, dbfc;

    @Setup(Level.Trial)
    public void setup() {
        int[] s = sizes(shape);
        BT = s[0];
        C = s[1];
        H = s[2];
        arena = Arena.ofShared();
        pool = new Parallel(threads);
        SplittableRandom rng = new SplittableRandom(42);
        ln = GeluBench.random(arena, (long) BT * C, rng, 1);
        wfc = GeluBench.random(arena, (long) H * C, rng, 0.1f);
        bfc = GeluBench.random(arena, H, rng, 0.1f);
        wproj = GeluBench.random(arena, (long) C * H, rng, 0.1f);
        dres = GeluBench.random(arena, (long) BT * C, rng, 1);
        fch = floats((long) BT * H);
        fchGelu = floats((long) BT * H);
        dfchGelu = floats((long) BT * H);
        dfch = floats((long) BT * H);
        dwproj = floats((long) C * H);
        dbproj = floats(C);
        dbfc = floats(H);
        Matmul.forwardGelu(pool, fchGelu, fch, ln, wfc, bfc, BT, C, H, DType.FP32);
    }

    private MemorySegment floats(long n) {
        return arena.allocate(n * Float.BYTES, 64);
    }

    static int[] sizes(String shape) {
        String[] p = shape.split("x");
        return new int[] {Integer.parseInt(p[0]), Integer.parseInt(p[1]), Integer.parseInt(p[2])};
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        arena.close();
    }

    /** The GEMMs' flops; each fused method against its unfused baseline. */
    public static Work work(String method, Map<String, String> params) {
        int[] s = sizes(params.get("shape"));
        double mnk = (double) s[0] * s[1] * s[2];
        return switch (method) {
            case "forwardFused" -> Work.flops(2 * mnk, "forwardUnfused");
            case "forwardUnfused" -> Work.flops(2 * mnk, null);
            case "backwardFused" -> Work.flops(4 * mnk, "backwardUnfused");
            case "backwardUnfused" -> Work.flops(4 * mnk, null);
            default -> throw new IllegalArgumentException("unknown method " + method);
        };
    }

    @Benchmark
    public void forwardFused() {
        Matmul.forwardGelu(pool, fchGelu, fch, ln, wfc, bfc, BT, C, H, DType.FP32);
    }

    @Benchmark
    public void forwardUnfused() {
        Matmul.forward(pool, fch, ln, wfc, bfc, BT, C, H);
        Gelu.forward(pool, fchGelu, fch, (long) BT * H);
    }

    @Benchmark
    public void backwardFused() {
        Matmul.backwardGelu(pool, dfch, dbfc, dwproj, dbproj, dres, fchGelu, fch, wproj, BT, H, C, DType.FP32);
    }

    @Benchmark
    public void backwardUnfused() {
        dfchGelu.fill((byte) 0);
        Matmul.backward(pool, dfchGelu, dwproj, dbproj, dres, fchGelu, wproj, BT, H, C);
        dfch.fill((byte) 0);
        Gelu.backward(pool, dfch, fch, dfchGelu, (long) BT * H);
        Matmul.biasGradient(pool, dbfc, dfch, BT, H);
    }
}
