package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertClose;
import static io.accel4j.kernels.GpuFixture.assertSameBits;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * the encoder ({@link EncoderGpu}) on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one thread)
 * on random inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link GpuFixture}).
 */
class EncoderGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    /** Column sums over N rows (layernorm's dweight/dbias, encoder's dwte/dwpe): N·2⁻²⁴ relative, N ≤ 300. */
    private static final double COLUMN_TOL = 1e-4;

    @Test
    void encoderMatchesCpu() {
        int B = 3, T = 97, C = 131, V = 503;
        long btc = (long) B * T * C;
        MemorySegment inp = F.ints((long) B * T, V, SEED), wte = F.floats((long) V * C, -1, 1, SEED + 1);
        MemorySegment wpe = F.floats((long) T * C, -1, 1, SEED + 2), dout = F.floats(btc, -1, 1, SEED + 3);
        MemorySegment pWte = F.floats((long) V * C, -1, 1, SEED + 4), pWpe = F.floats((long) T * C, -1, 1, SEED + 5);
        MemorySegment out = F.nans(btc), dwte = F.copy(pWte), dwpe = F.copy(pWpe);
        F.cpu.encoderForward(out, inp, wte, wpe, B, T, C, V);
        F.cpu.encoderBackward(dwte, dwpe, dout, inp, B, T, C, V);
        MemorySegment gInp = F.up(inp), gOut = F.up(F.nans(btc)), gDwte = F.up(pWte), gDwpe = F.up(pWpe);
        F.gpu.encoderForward(gOut, gInp, F.up(wte), F.up(wpe), B, T, C, V);
        F.gpu.encoderBackward(gDwte, gDwpe, F.up(dout), gInp, B, T, C, V);
        assertSameBits("encoder out", F.down(gOut), out, 4 * btc);
        assertClose("encoder dwte", F.down(gDwte), dwte, (long) V * C, COLUMN_TOL);
        assertClose("encoder dwpe", F.down(gDwpe), dwpe, (long) T * C, COLUMN_TOL);
    }
}
