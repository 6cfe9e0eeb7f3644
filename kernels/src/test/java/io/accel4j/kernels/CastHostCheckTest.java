package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * cast.cu's element conversions, compiled for the host by nvcc ({@code src/test/cuda/cast_host_check.cu}), against
 * the CPU casts ({@link CpuOps}, i.e. core's {@link DType#encode}) bit for bit: no GPU needed. The fp8 code runs the
 * same software path as the sm_80 PTX; bf16/fp16 run the CUDA headers' host emulation of {@code cvt.rn} (the device
 * instruction itself is checked by {@code CastGpuTest} on a GPU). Skipped without nvcc.
 */
class CastHostCheckTest {

    private static final long SEED = 31337L;
    /** The harness writes little-endian values at any offset. */
    private static final ValueLayout.OfShort LE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt LE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static Parallel pool;
    private static CpuOps cpu;

    @TempDir
    static Path tmp;
    private static Path exe;

    @BeforeAll
    static void compile() throws Exception {
        Path nvcc = KernelPtxTest.findTool("nvcc");
        assumeTrue(nvcc != null, "nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): cast.cu not run");
        exe = tmp.resolve("cast_host_check");
        KernelPtxTest.run(List.of(nvcc.toString(), "-O1", "-arch=sm_80", "-Isrc/main/cuda", "-o", exe.toString(),
                "src/test/cuda/cast_host_check.cu"), Map.of());
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        if (pool != null) {
            pool.close();
        }
    }

    /** Every exponent (random bit patterns: subnormals, infinities, NaN payloads), values near each format's range. */
    private static float[] inputs(int n) {
        SplittableRandom r = new SplittableRandom(SEED);
        float[] edges = {0f, -0f, 1f, -1f, Float.MIN_VALUE, -Float.MIN_NORMAL, Float.MAX_VALUE, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xFFC0_0001), Float.intBitsToFloat(0x7F80_0001),
            Float.intBitsToFloat(0xFFA0_1234), 448f, 464f, Math.nextUp(464f), Math.nextDown(464f), 480f, 57344f,
            61440f, Math.nextDown(61440f), 65504f, 65520f, Math.nextDown(65520f), 0x1p-9f, 0x1p-10f,
            Math.nextUp(0x1p-10f), 0x1.8p-9f, 0x1p-16f, 0x1p-17f, Math.nextUp(0x1p-17f), 0x1p-24f, 0x1p-25f,
            0x1.8p-24f, 0x1.ffp127f, 0x1.fep127f, Math.nextDown(0x1.ffp127f), 1.00390625f, 1.01171875f, 1.0625f,
            1.1875f, 1.125f, -1.0625f};
        float[] maxima = {448f, 57344f, 65504f, 1f};
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            if (i < edges.length) {
                x[i] = edges[i];
            } else if (i % 2 == 0) {
                x[i] = Float.intBitsToFloat(r.nextInt());
            } else {
                float max = maxima[(i >> 1) % maxima.length];
                x[i] = (float) r.nextDouble(-2.0 * max, 2.0 * max);
            }
        }
        return x;
    }

    @Test
    void encodeMatchesCpuBitForBit() throws Exception {
        int n = (1 << 20) + 17;
        float[] x = inputs(n);
        Path in = tmp.resolve("in.f32");
        Files.write(in, MemorySegment.ofArray(x).toArray(JAVA_BYTE));
        try (Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocateFrom(JAVA_FLOAT, x);
            for (float scale : new float[] {1f, 448f / 37.5f, 0.75f}) {
                Path out = tmp.resolve("out.bin");
                KernelPtxTest.run(List.of(exe.toString(), "enc", in.toString(), out.toString(), Float.toString(scale)),
                        Map.of());
                MemorySegment got = MemorySegment.ofArray(Files.readAllBytes(out));
                MemorySegment bf = arena.allocate(2L * n), hf = arena.allocate(2L * n);
                MemorySegment e4 = arena.allocate(n), e5 = arena.allocate(n);
                cpu.castFromFp32(bf, DType.BF16, src, n);
                cpu.castFromFp32(hf, DType.FP16, src, n);
                cpu.castToFp8(e4, DType.FP8_E4M3, src, n, scale);
                cpu.castToFp8(e5, DType.FP8_E5M2, src, n, scale);
                for (int i = 0; i < n; i++) {
                    check("bf16", x[i], bf.getAtIndex(JAVA_SHORT, i) & 0xFFFF,
                            got.get(LE16, 2L * i) & 0xFFFF, false);
                    check("fp16", x[i], hf.getAtIndex(JAVA_SHORT, i) & 0xFFFF,
                            got.get(LE16, 2L * n + 2L * i) & 0xFFFF, true);
                    check("e4m3·" + scale, x[i], e4.get(JAVA_BYTE, i) & 0xFF, got.get(JAVA_BYTE, 4L * n + i) & 0xFF,
                            false);
                    check("e5m2·" + scale, x[i], e5.get(JAVA_BYTE, i) & 0xFF, got.get(JAVA_BYTE, 5L * n + i) & 0xFF,
                            false);
                }
            }
        }
    }

    /** Equal codes; fp16 NaNs only by sign (the JDK's fp16 NaN payload is platform-dependent). */
    private static void check(String what, float x, int cpuCode, int cudaCode, boolean fp16) {
        boolean nanBySign = fp16 && (cpuCode & 0x7FFF) > 0x7C00 && (cudaCode & 0x7FFF) > 0x7C00
                && (cpuCode & 0x8000) == (cudaCode & 0x8000);
        if (cpuCode != cudaCode && !nanBySign) {
            throw new AssertionError(String.format("%s of %s (0x%08x): cast.cu 0x%x, CPU 0x%x (seed %d)", what,
                    Float.toString(x), Float.floatToRawIntBits(x), cudaCode, cpuCode, SEED));
        }
    }

    @Test
    void decodeMatchesCpuForEveryCode() throws Exception {
        for (float scaleInv : new float[] {1f, 1f / 37.25f, 0x1p-20f}) {
            Path out = tmp.resolve("dec.bin");
            KernelPtxTest.run(List.of(exe.toString(), "dec", out.toString(), Float.toString(scaleInv)), Map.of());
            MemorySegment got = MemorySegment.ofArray(Files.readAllBytes(out));
            try (Arena arena = Arena.ofShared()) {
                MemorySegment codes16 = arena.allocate(2L * 65536), codes8 = arena.allocate(256);
                for (int c = 0; c < 65536; c++) {
                    codes16.setAtIndex(JAVA_SHORT, c, (short) c);
                }
                for (int c = 0; c < 256; c++) {
                    codes8.set(JAVA_BYTE, c, (byte) c);
                }
                long at = 0;
                for (DType t : List.of(DType.BF16, DType.FP16, DType.FP8_E4M3, DType.FP8_E5M2)) {
                    int count = t.byteSize() == 2 ? 65536 : 256;
                    float s = t.isFp8() ? scaleInv : 1f;
                    MemorySegment ref = arena.allocate(4L * count);
                    cpu.castToFp32(ref, t.byteSize() == 2 ? codes16 : codes8, t, count, s);
                    for (int c = 0; c < count; c++) {
                        int want = Float.floatToRawIntBits(ref.getAtIndex(JAVA_FLOAT, c));
                        int have = got.get(LE32,
                                4 * (at + c));
                        boolean nanBySign = t == DType.FP16 && Float.isNaN(Float.intBitsToFloat(want))
                                && Float.isNaN(Float.intBitsToFloat(have)) && (want < 0) == (have < 0);
                        if (want != have && !nanBySign) {
                            throw new AssertionError(String.format("decode %s code 0x%x scaleInv %s: cast.cu 0x%08x,"
                                    + " CPU 0x%08x", t, c, scaleInv, have, want));
                        }
                    }
                    at += count;
                }
            }
        }
    }
}
