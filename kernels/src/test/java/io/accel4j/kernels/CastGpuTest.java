package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertSameBits;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * the casts ({@link CastGpu}): bit for bit the CPU's (core's DType.encode / decode) on the GPU against the CPU
 * kernel ({@link io.accel4j.cpu.ops.CpuOps}, one thread) on random inputs with odd sizes. Needs a GPU: skipped,
 * saying why, where there is none ({@link GpuFixture}).
 */
class CastGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /**
     * n floats: random bit patterns (every exponent, subnormals, infinities, NaNs with payloads), random values in
     * [-2·max, 2·max] of {@code type}, and the edge cases of every format (ties, overflow thresholds, the smallest
     * subnormals and half of them, signed zeros).
     */
    private MemorySegment castInputs(long n, float max, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] edges = {0f, -0f, 1f, -1f, Float.MIN_VALUE, -Float.MIN_NORMAL, Float.MAX_VALUE, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xFFC0_0001), Float.intBitsToFloat(0x7F80_0001),
            Float.intBitsToFloat(0x7FA0_1234), 448f, 464f, Math.nextUp(464f), Math.nextDown(464f), 480f, 57344f,
            61440f, Math.nextDown(61440f), 65504f, 65520f, Math.nextDown(65520f), 0x1p-9f, 0x1p-10f,
            Math.nextUp(0x1p-10f), 0x1.8p-9f, 0x1p-16f, 0x1p-17f, Math.nextUp(0x1p-17f), 0x1p-24f, 0x1p-25f,
            0x1.8p-24f, 0x1.ffp127f, 0x1.fep127f, Math.nextDown(0x1.ffp127f), 1.00390625f, 1.01171875f, 1.0625f,
            1.1875f, 1.125f, -1.0625f};
        MemorySegment s = F.arena().allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            float x;
            if (i < edges.length) {
                x = edges[(int) i];
            } else if (i % 2 == 0) {
                x = Float.intBitsToFloat(r.nextInt());
            } else {
                x = (float) r.nextDouble(-2.0 * max, 2.0 * max);
            }
            s.setAtIndex(JAVA_FLOAT, i, x);
        }
        return s;
    }

    /** 16-bit codes equal, except that fp16 NaNs only need the sign (the JDK's NaN payload is platform-dependent). */
    private static void assertSameHalves(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n,
                                         boolean fp16) {
        for (long i = 0; i < n; i++) {
            int g = gpuOut.getAtIndex(JAVA_SHORT, i) & 0xFFFF;
            int c = cpuOut.getAtIndex(JAVA_SHORT, i) & 0xFFFF;
            boolean sameNan = fp16 && (c & 0x7FFF) > 0x7C00 && (g & 0x7FFF) > 0x7C00 && (c & 0x8000) == (g & 0x8000);
            if (g != c && !sameNan) {
                throw new AssertionError(String.format("%s[%d]: gpu 0x%04x, cpu 0x%04x (seed %d)", what, i, g, c,
                        SEED));
            }
        }
    }

    @Test
    void castsToBf16AndFp16MatchCpuBitForBit() {
        long n = (1 << 20) + 11;
        for (DType t : List.of(DType.BF16, DType.FP16)) {
            MemorySegment x = castInputs(n, t.maxFinite(), SEED + t.ordinal());
            MemorySegment c = F.arena().allocate(2 * n, 16);
            F.cpu.castFromFp32(c, t, x, n);
            DeviceBuffer d = F.allocate(2 * n);
            d.fill((byte) 0x55);
            F.gpu.castFromFp32(GpuOps.device(d), t, F.up(x), n);
            assertSameHalves("castFromFp32 " + t, F.down(GpuOps.device(d)), c, n, t == DType.FP16);
        }
        MemorySegment x = castInputs(1001, 1, SEED);
        MemorySegment g = F.up(F.nans(1001));
        F.gpu.castFromFp32(g, DType.FP32, F.up(x), 1001);
        assertSameBits("castFromFp32 FP32 (a copy)", F.down(g), x, 4 * 1001);
    }

    @Test
    void castsToFp8MatchCpuBitForBitWithTheAmax() {
        long n = (1 << 20) + 13;
        for (DType t : List.of(DType.FP8_E4M3, DType.FP8_E5M2)) {
            for (float scale : new float[] {1f, t.maxFinite() / 37.5f, 0.75f}) {
                MemorySegment x = castInputs(n, t.maxFinite(), SEED + t.ordinal());
                MemorySegment c = F.arena().allocate(n, 16);
                float cpuAmax = F.cpu.castToFp8(c, t, x, n, scale);
                DeviceBuffer d = F.allocate(n);
                d.fill((byte) 0x55);
                float gpuAmax = F.gpu.castToFp8(GpuOps.device(d), t, F.up(x), n, scale);
                assertSameBits("castToFp8 " + t + " scale " + scale, F.down(GpuOps.device(d)), c, n);
                assertThat(Float.floatToRawIntBits(gpuAmax)).as("amax, %s scale %s", t, scale)
                        .isEqualTo(Float.floatToRawIntBits(cpuAmax));
            }
        }
        assertThat(F.gpu.castToFp8(F.up(F.nans(4)), DType.FP8_E4M3, F.up(F.nans(4)), 0, 1f)).isZero();
    }

    @Test
    void castsToFp32MatchCpuForEveryCode() {
        // every 16-bit and every 8-bit code, twice over with an odd tail
        long n16 = 2 * 65536 + 3, n8 = 2 * 256 + 5;
        MemorySegment h = F.arena().allocate(2 * n16, 16), b = F.arena().allocate(n8, 16);
        for (long i = 0; i < n16; i++) {
            h.setAtIndex(JAVA_SHORT, i, (short) i);
        }
        for (long i = 0; i < n8; i++) {
            b.set(JAVA_BYTE, i, (byte) i);
        }
        for (DType t : DType.values()) {
            if (t == DType.FP32) {
                continue;
            }
            long n = t.byteSize() == 2 ? n16 : n8;
            MemorySegment src = t.byteSize() == 2 ? h : b;
            for (float scaleInv : t.isFp8() ? new float[] {1f, 1f / 37.25f, 0x1p-20f} : new float[] {1f}) {
                MemorySegment c = F.nans(n);
                F.cpu.castToFp32(c, src, t, n, scaleInv);
                MemorySegment g = F.up(F.nans(n));
                F.gpu.castToFp32(g, F.up(src), t, n, scaleInv);
                MemorySegment gh = F.down(g);
                for (long i = 0; i < n; i++) {
                    int gb = Float.floatToRawIntBits(gh.getAtIndex(JAVA_FLOAT, i));
                    int cb = Float.floatToRawIntBits(c.getAtIndex(JAVA_FLOAT, i));
                    boolean sameNan = t == DType.FP16 && Float.isNaN(Float.intBitsToFloat(gb))
                            && Float.isNaN(Float.intBitsToFloat(cb)) && (gb < 0) == (cb < 0);
                    if (gb != cb && !sameNan) {
                        throw new AssertionError(String.format("castToFp32 %s scaleInv %s code 0x%x: gpu 0x%08x,"
                                + " cpu 0x%08x", t, scaleInv, i, gb, cb));
                    }
                }
            }
        }
    }
}
