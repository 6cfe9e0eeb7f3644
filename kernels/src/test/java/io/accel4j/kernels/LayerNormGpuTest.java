package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertClose;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * layernorm ({@link LayerNormGpu}) on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one thread)
 * on random inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link GpuFixture}).
 */
class LayerNormGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /**
     * Row reductions over C ≈ 800 in fp32 in a different order (warp tree vs. vector lanes): the rounding error of a
     * sum of C terms is ≤ C·2⁻²⁴·Σ|terms| in the worst case, ~√C·2⁻²⁴ typically; 1e-4·(1 + |ref|) covers the worst
     * case for values of order 1 (mean, rstd, normalised outputs, dinp).
     */
    private static final double ROW_TOL = 1e-4;

    /** Column sums over N rows (layernorm's dweight/dbias, encoder's dwte/dwpe): N·2⁻²⁴ relative, N ≤ 300. */
    private static final double COLUMN_TOL = 1e-4;

    @Test
    void layernormMatchesCpu() {
        int N = 301, C = 771;
        long nc = (long) N * C;
        MemorySegment x = F.floats(nc, -3, 5, SEED), w = F.floats(C, 0.5, 1.5, SEED + 1), b = F.floats(C, -1, 1, SEED + 2);
        MemorySegment dout = F.floats(nc, -1, 1, SEED + 3);
        MemorySegment pDx = F.floats(nc, -1, 1, SEED + 4), pDw = F.floats(C, -1, 1, SEED + 5);
        MemorySegment pDb = F.floats(C, -1, 1, SEED + 6);
        MemorySegment out = F.nans(nc), mean = F.nans(N), rstd = F.nans(N), dx = F.copy(pDx), dw = F.copy(pDw), db = F.copy(pDb);
        F.cpu.layernormForward(out, mean, rstd, x, w, b, N, C);
        F.cpu.layernormBackward(dx, dw, db, dout, x, w, mean, rstd, N, C);
        MemorySegment gX = F.up(x), gW = F.up(w), gOut = F.up(F.nans(nc)), gMean = F.up(F.nans(N)), gRstd = F.up(F.nans(N));
        MemorySegment gDx = F.up(pDx), gDw = F.up(pDw), gDb = F.up(pDb);
        F.gpu.layernormForward(gOut, gMean, gRstd, gX, gW, F.up(b), N, C);
        F.gpu.layernormBackward(gDx, gDw, gDb, F.up(dout), gX, gW, gMean, gRstd, N, C);
        assertClose("layernorm out", F.down(gOut), out, nc, ROW_TOL);
        assertClose("layernorm mean", F.down(gMean), mean, N, ROW_TOL);
        assertClose("layernorm rstd", F.down(gRstd), rstd, N, ROW_TOL);
        assertClose("layernorm dinp", F.down(gDx), dx, nc, ROW_TOL);
        assertClose("layernorm dweight", F.down(gDw), dw, C, COLUMN_TOL);
        assertClose("layernorm dbias", F.down(gDb), db, C, COLUMN_TOL);
    }
}
