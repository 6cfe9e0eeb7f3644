package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertSameBits;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * AdamW, one range and many ({@link AdamWGpu}): the GPU does the CPU's fp32 operations in the same order without
 * FMA, so bits agree on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one thread) on random
 * inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link GpuFixture}).
 */
class AdamWGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    @Test
    void adamwMatchesCpuBitForBit() {
        long n = 100_003, offset = 12_345;
        AdamWConfig k = new AdamWConfig(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
        MemorySegment p = F.floats(n, -1, 1, SEED), g = F.floats(n, -1, 1, SEED + 1);
        MemorySegment m = F.floats(n, -0.1, 0.1, SEED + 2), v = F.floats(n, 0, 0.01, SEED + 3);
        MemorySegment gP = F.up(p), gG = F.up(g), gM = F.up(m), gV = F.up(v);
        MemorySegment cP = F.copy(p), cM = F.copy(m), cV = F.copy(v);
        F.cpu.adamw(cP, g, cM, cV, offset, n, k, 7, 0.5f);
        F.gpu.adamw(gP, gG, gM, gV, offset, n, k, 7, 0.5f);
        assertSameBits("adamw params", F.down(gP), cP, 4 * n);
        assertSameBits("adamw m", F.down(gM), cM, 4 * n);
        assertSameBits("adamw v", F.down(gV), cV, 4 * n);
    }

    @Test
    void adamwBf16MatchesCpuBitForBit() {
        long n = 65_537, offset = 1L << 33;
        long seed = 0x5EED_0000_0001L;
        AdamWConfig k = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        MemorySegment p = F.floats(n, -1, 1, SEED), g = F.floats(n, -10, 10, SEED + 1);
        MemorySegment m = F.floats(n, -0.1, 0.1, SEED + 2), v = F.floats(n, 0, 0.01, SEED + 3);
        MemorySegment cBf = F.arena().allocate(2 * n, 16), cP = F.copy(p), cM = F.copy(m), cV = F.copy(v);
        F.cpu.adamwBf16(cBf, cP, g, cM, cV, offset, n, k, 1, 0.25f, seed);
        DeviceBuffer bf = F.allocate(2 * n);
        MemorySegment gBf = GpuOps.device(bf), gP = F.up(p), gM = F.up(m), gV = F.up(v);
        F.gpu.adamwBf16(gBf, gP, F.up(g), gM, gV, offset, n, k, 1, 0.25f, seed);
        assertSameBits("adamwBf16 master", F.down(gP), cP, 4 * n);
        assertSameBits("adamwBf16 m", F.down(gM), cM, 4 * n);
        assertSameBits("adamwBf16 v", F.down(gV), cV, 4 * n);
        assertSameBits("adamwBf16 bf16 copy", F.down(gBf), cBf, 2 * n);
    }

    @Test
    void adamwOverRangesMatchesCpuBitForBit() {
        long n = AdamWRangesCase.ELEMENTS;
        AdamWConfig k = AdamWRangesCase.CONFIG;
        for (boolean bf16 : new boolean[] {false, true}) {
            MemorySegment p = F.floats(n, -1, 1, SEED), g = F.floats(n, -10, 10, SEED + 1);
            MemorySegment m = F.floats(n, -0.1, 0.1, SEED + 2), v = F.floats(n, 0, 0.01, SEED + 3);
            MemorySegment cP = F.copy(p), cM = F.copy(m), cV = F.copy(v), cBf = F.arena().allocate(2 * n, 16).fill((byte) -1);
            DeviceBuffer bf = F.allocate(2 * n);
            bf.fill((byte) -1);
            MemorySegment gBf = GpuOps.device(bf), gP = F.up(p), gG = F.up(g), gM = F.up(m), gV = F.up(v);
            if (bf16) {
                F.cpu.adamwBf16(cBf, cP, g, cM, cV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP,
                        AdamWRangesCase.GRAD_SCALE, AdamWRangesCase.SEED);
                F.gpu.adamwBf16(gBf, gP, gG, gM, gV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP,
                        AdamWRangesCase.GRAD_SCALE, AdamWRangesCase.SEED);
            } else {
                F.cpu.adamw(cP, g, cM, cV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP, AdamWRangesCase.GRAD_SCALE);
                F.gpu.adamw(gP, gG, gM, gV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP, AdamWRangesCase.GRAD_SCALE);
            }
            String what = bf16 ? "adamwBf16 over ranges " : "adamw over ranges ";
            assertSameBits(what + "params", F.down(gP), cP, 4 * n);
            assertSameBits(what + "m", F.down(gM), cM, 4 * n);
            assertSameBits(what + "v", F.down(gV), cV, 4 * n);
            assertSameBits(what + "bf16 copy", F.down(gBf), cBf, 2 * n);
        }
    }
}
