package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertCloseToLargest;
import static io.accel4j.kernels.GpuFixture.assertSameBits;

import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * fp32 attention ({@link AttentionGpu}) against the CPU's FlashAttention (CpuOps' default) on odd T, partial tiles
 * and padded heads on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one thread) on random
 * inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link GpuFixture}).
 */
class AttentionGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /**
     * Attention in fp32 on both sides, summed in different orders (tiles of 32/16 vs 64, warp trees vs vector lanes,
     * CUDA's expf vs Softmax.exp, both within 2 ulp): every output is a sum of ≤ T ≈ 1000 terms of similar size, whose
     * rounding error grows like √T·2⁻²⁴ relative to the largest term (~2e-6 at T 1000; the CPU emulation of the
     * kernels in double reference measured ≤ 5e-7 at T 130); 1e-5 of the largest magnitude of each tensor is ~5× that.
     */
    private static final double ATTENTION_TOL = 1e-5;

    @Test
    void attentionHeadSize64ThreeHeadsMatchesCpu() {
        attentionMatchesCpu(2, 67, 192, 3);
    }

    @Test
    void attentionHeadSize128OneHeadMatchesCpu() {
        attentionMatchesCpu(1, 67, 128, 1);
    }

    @Test
    void attentionLongSequencesMatchCpu() {
        attentionMatchesCpu(1, 1000, 192, 3); // hs 64
        attentionMatchesCpu(1, 1000, 128, 1); // hs 128
    }

    @Test
    void attentionHeadSize128ThreeHeadsMatchesCpu() {
        attentionMatchesCpu(2, 131, 384, 3);
    }

    @Test
    void attentionPaddedHeadSizesMatchCpu() {
        attentionMatchesCpu(1, 35, 96, 2);  // hs 48, padded to 64
        attentionMatchesCpu(2, 33, 40, 2);  // hs 20, padded to 32
        attentionMatchesCpu(1, 1, 64, 1);   // a single position
    }

    @Test
    void attentionMatchesNaiveCpu() {
        int B = 1, T = 97, C = 192, NH = 3;
        long btc = (long) B * T * C, nLse = (long) B * NH * T;
        MemorySegment qkv = F.floats(3 * btc, -2, 2, SEED);
        MemorySegment out = F.nans(btc), lse = F.nans(nLse);
        new CpuOps(F.pool(), CpuOps.AttentionKernel.NAIVE).attentionForward(out, lse, qkv, B, T, C, NH);
        MemorySegment gOut = F.up(F.nans(btc)), gLse = F.up(F.nans(nLse));
        F.gpu.attentionForward(gOut, gLse, F.up(qkv), B, T, C, NH);
        assertCloseToLargest("attention out vs naive", F.down(gOut), out, btc, ATTENTION_TOL);
        assertCloseToLargest("attention lse vs naive", F.down(gLse), lse, nLse, ATTENTION_TOL);
    }

    /**
     * Forward (out and lse poisoned with NaN) and backward (into a pre-filled dqkv) against the CPU, and the backward
     * run twice on the GPU gives the same bits (no atomics).
     */
    private void attentionMatchesCpu(int B, int T, int C, int NH) {
        long btc = (long) B * T * C, nLse = (long) B * NH * T;
        long seed = SEED + 31L * T + C + NH;
        MemorySegment qkv = F.floats(3 * btc, -2, 2, seed), dout = F.floats(btc, -1, 1, seed + 1);
        MemorySegment prefill = F.floats(3 * btc, -1, 1, seed + 2);
        MemorySegment out = F.nans(btc), lse = F.nans(nLse), dqkv = F.copy(prefill);
        F.cpu.attentionForward(out, lse, qkv, B, T, C, NH);
        F.cpu.attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        MemorySegment gQkv = F.up(qkv), gOut = F.up(F.nans(btc)), gLse = F.up(F.nans(nLse));
        F.gpu.attentionForward(gOut, gLse, gQkv, B, T, C, NH);
        String shape = " (B " + B + ", T " + T + ", C " + C + ", NH " + NH + ")";
        assertCloseToLargest("attention out" + shape, F.down(gOut), out, btc, ATTENTION_TOL);
        assertCloseToLargest("attention lse" + shape, F.down(gLse), lse, nLse, ATTENTION_TOL);
        MemorySegment gDout = F.up(dout), gDqkv = F.up(prefill), gDqkv2 = F.up(prefill);
        F.gpu.attentionBackward(gDqkv, gDout, gQkv, gOut, gLse, B, T, C, NH);
        F.gpu.attentionBackward(gDqkv2, gDout, gQkv, gOut, gLse, B, T, C, NH);
        MemorySegment got = F.down(gDqkv);
        assertCloseToLargest("attention dqkv" + shape, got, dqkv, 3 * btc, ATTENTION_TOL);
        assertSameBits("attention dqkv, second run" + shape, F.down(gDqkv2), got, 4 * 3 * btc);
    }
}
