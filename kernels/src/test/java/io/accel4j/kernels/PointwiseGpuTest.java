package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertClose;
import static io.accel4j.kernels.GpuFixture.assertSameBits;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * GELU and the residual add ({@link PointwiseGpu}) on the GPU against the CPU kernel ({@link
 * io.accel4j.cpu.ops.CpuOps}, one thread) on random inputs with odd sizes. Needs a GPU: skipped, saying why, where
 * there is none ({@link GpuFixture}).
 */
class PointwiseGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /**
     * Element-wise fp32 with a transcendental (GELU's tanh): CUDA's tanhf is within 2 ulp and the CPU's SVML tanh
     * within 1 ulp of the true value, and the few products around it add a few ulp: |Δ| ≤ 1e-5·(1 + |ref|) is ~100
     * ulp of slack at |x| ≤ 4.
     */
    private static final double POINTWISE_TOL = 1e-5;

    @Test
    void geluMatchesCpu() {
        long n = (1 << 20) + 7;
        MemorySegment x = F.floats(n, -4, 4, SEED), dout = F.floats(n, -1, 1, SEED + 1);
        MemorySegment prefill = F.floats(n, -1, 1, SEED + 2);
        MemorySegment out = F.nans(n), dx = F.copy(prefill);
        F.cpu.geluForward(out, x, n);
        F.cpu.geluBackward(dx, x, dout, n);
        MemorySegment gOut = F.up(F.nans(n)), gDx = F.up(prefill);
        F.gpu.geluForward(gOut, F.up(x), n);
        F.gpu.geluBackward(gDx, F.up(x), F.up(dout), n);
        assertClose("gelu out", F.down(gOut), out, n, POINTWISE_TOL);
        assertClose("gelu dinp", F.down(gDx), dx, n, POINTWISE_TOL);
    }

    @Test
    void residualMatchesCpuBitForBit() {
        long n = (1 << 20) + 3;
        MemorySegment a = F.floats(n, -2, 2, SEED), b = F.floats(n, -2, 2, SEED + 1), d = F.floats(n, -1, 1, SEED + 2);
        MemorySegment p1 = F.floats(n, -1, 1, SEED + 3), p2 = F.floats(n, -1, 1, SEED + 4);
        MemorySegment out = F.nans(n), d1 = F.copy(p1), d2 = F.copy(p2);
        F.cpu.residualForward(out, a, b, n);
        F.cpu.residualBackward(d1, d2, d, n);
        MemorySegment gOut = F.up(F.nans(n)), gD1 = F.up(p1), gD2 = F.up(p2);
        F.gpu.residualForward(gOut, F.up(a), F.up(b), n);
        F.gpu.residualBackward(gD1, gD2, F.up(d), n);
        assertSameBits("residual out", F.down(gOut), out, 4 * n);
        assertSameBits("residual dinp1", F.down(gD1), d1, 4 * n);
        assertSameBits("residual dinp2", F.down(gD2), d2, 4 * n);
    }
}
