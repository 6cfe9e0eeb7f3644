package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Needs a GPU, not cuBLAS (issue 18, item 5: these checks were skipped with the cuBLASLt tests): {@link GpuOps}'
 * FP8 cast-transpose gives the CPU cast's codes, their transpose bit for bit, and the CPU amax.
 */
class CastTransposeGpuTest {

    private static final long SEED = 20261203L;
    private static CudaContext ctx;
    private static GpuOps gpu;
    private static Parallel pool;
    private static CpuOps cpu;

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        if (gpu != null) {
            gpu.close();
        }
        if (ctx != null) {
            ctx.close();
        }
        if (pool != null) {
            pool.close();
        }
    }

    @ParameterizedTest(name = "{0} {1}x{2}")
    @CsvSource({"FP8_E4M3, 48, 40, 64", "FP8_E5M2, 33, 70, 2048", "FP8_E4M3, 1, 1, 1"})
    void codesTransposeAndAmaxMatchTheCpuCast(DType type, int R, int C, float scale) {
        long n = (long) R * C;
        try (Arena arena = Arena.ofConfined(); DeviceArena dev = gpu.memory().arena()) {
            SplittableRandom r = new SplittableRandom(SEED + R);
            MemorySegment src = arena.allocate(4 * n);
            for (long i = 0; i < n; i++) {
                src.setAtIndex(JAVA_FLOAT, i, (float) r.nextDouble(-1, 1));
            }
            MemorySegment codes = arena.allocate(n);
            float amax = cpu.castToFp8(codes, type, src, n, scale);
            MemorySegment gSrc = dev.allocate(4 * n), gDst = dev.allocate(n), gDstT = dev.allocate(n);
            gpu.memory().copyToDevice(src, gSrc);
            assertThat(gpu.castTransposeToFp8(gDst, gDstT, type, gSrc, R, C, scale)).as("amax, seed %d", SEED)
                    .isEqualTo(amax);
            MemorySegment dst = arena.allocate(n).fill((byte) 0x7f), dstT = arena.allocate(n).fill((byte) 0x7f);
            gpu.memory().copyToHost(gDst, dst);
            gpu.memory().copyToHost(gDstT, dstT);
            assertThat(dst.mismatch(codes)).as("codes, seed %d", SEED).isEqualTo(-1);
            for (int row = 0; row < R; row++) {
                for (int col = 0; col < C; col++) {
                    assertThat(dstT.get(JAVA_BYTE, (long) col * R + row)).as("transpose (%d, %d)", row, col)
                            .isEqualTo(codes.get(JAVA_BYTE, (long) row * C + col));
                }
            }
        }
    }
}
