package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertClose;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cuda.CudaLibraries;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * the matmuls through GpuOps (cuBLASLt) on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one
 * thread) on random inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link
 * GpuFixture}).
 */
class MatmulGpuOpsTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /** Column sums over N rows (layernorm's dweight/dbias, encoder's dwte/dwpe): N·2⁻²⁴ relative, N ≤ 300. */
    private static final double COLUMN_TOL = 1e-4;

    /**
     * fp32 dot products of K ≤ 203 terms |a·b| ≤ 1 in another order (cuBLASLt tiles vs. the CPU's vector lanes): worst
     * case K·2⁻²⁴·Σ|a·b| ≈ 6e-4 absolute, typically √K·2⁻²⁴·… ≈ 1e-5; 2e-4·(1 + |ref|) covers outputs of order √K ≈ 8.
     * TF32 (10 mantissa bits) would be off by ~1e-2 and fail.
     */
    private static final double MATMUL_TOL = 2e-4;

    @Test
    void matmulMatchesCpu() {
        assumeTrue(CudaLibraries.cublasLt().found(),
                CudaLibraries.cublasLt().notFoundMessage());
        int N = 97, C = 131, OC = 203;
        MemorySegment inp = F.floats((long) N * C, -1, 1, SEED), w = F.floats((long) OC * C, -1, 1, SEED + 1);
        MemorySegment b = F.floats(OC, -1, 1, SEED + 2), dout = F.floats((long) N * OC, -1, 1, SEED + 3);
        MemorySegment pDx = F.floats((long) N * C, -1, 1, SEED + 4), pDw = F.floats((long) OC * C, -1, 1, SEED + 5);
        MemorySegment pDb = F.floats(OC, -1, 1, SEED + 6);
        MemorySegment out = F.nans((long) N * OC), outNoBias = F.nans((long) N * OC);
        MemorySegment dx = F.copy(pDx), dw = F.copy(pDw), db = F.copy(pDb), dx2 = F.copy(pDx), dw2 = F.copy(pDw);
        F.cpu.matmulForward(out, inp, w, b, N, C, OC);
        F.cpu.matmulForward(outNoBias, inp, w, null, N, C, OC);
        F.cpu.matmulBackward(dx, dw, db, dout, inp, w, N, C, OC);
        F.cpu.matmulBackward(dx2, dw2, null, dout, inp, w, N, C, OC);
        MemorySegment gInp = F.up(inp), gW = F.up(w), gDout = F.up(dout), gB = F.up(b);
        MemorySegment gOut = F.up(F.nans((long) N * OC)), gOutNoBias = F.up(F.nans((long) N * OC));
        MemorySegment gDx = F.up(pDx), gDw = F.up(pDw), gDb = F.up(pDb), gDx2 = F.up(pDx), gDw2 = F.up(pDw);
        for (int rep = 0; rep < 2; rep++) { // the second time with the cached plan
            MemorySegment o = rep == 0 ? gOut : F.up(F.nans((long) N * OC));
            F.gpu.matmulForward(o, gInp, gW, gB, N, C, OC);
            assertClose("matmul out (run " + rep + ")", F.down(o), out, (long) N * OC, MATMUL_TOL);
        }
        F.gpu.matmulForward(gOutNoBias, gInp, gW, null, N, C, OC);
        F.gpu.matmulBackward(gDx, gDw, gDb, gDout, gInp, gW, N, C, OC);
        F.gpu.matmulBackward(gDx2, gDw2, null, gDout, gInp, gW, N, C, OC);
        assertClose("matmul out, no bias", F.down(gOutNoBias), outNoBias, (long) N * OC, MATMUL_TOL);
        assertClose("matmul dinp", F.down(gDx), dx, (long) N * C, MATMUL_TOL);
        assertClose("matmul dweight", F.down(gDw), dw, (long) OC * C, MATMUL_TOL);
        assertClose("matmul dbias", F.down(gDb), db, OC, COLUMN_TOL);
        assertClose("matmul dinp, no bias", F.down(gDx2), dx2, (long) N * C, MATMUL_TOL);
        assertClose("matmul dweight, no bias", F.down(gDw2), dw2, (long) OC * C, MATMUL_TOL);
        // an operand at an odd float offset (4-byte aligned): a plan for that alignment, same numbers
        MemorySegment shifted = F.up(F.nans((long) N * OC + 1));
        MemorySegment gOut4 = shifted.asSlice(4);
        F.gpu.matmulForward(gOut4, gInp, gW, gB, N, C, OC);
        assertClose("matmul out at a 4-byte aligned address", F.down(shifted).asSlice(4), out, (long) N * OC,
                MATMUL_TOL);
    }

    @Test
    void matmulWithoutCublasLtSaysWhatIsMissing() {
        assumeFalse(CudaLibraries.cublasLt().found(),
                "libcublasLt is installed here: nothing is missing");
        MemorySegment small = F.up(F.floats(10, -1, 1, SEED));
        assertThatThrownBy(() -> F.gpu.matmulForward(small, small, small, null, 1, 1, 1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("matmulForward on the GPU needs cuBLASLt: libcublasLt.so.13 not found");
        assertThat(F.gpu.describe()).contains("no cuBLASLt");
    }
}
