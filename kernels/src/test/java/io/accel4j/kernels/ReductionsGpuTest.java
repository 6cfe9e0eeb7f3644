package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * the reductions ({@link ReductionsGpu}) on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps}, one
 * thread) on random inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link
 * GpuFixture}).
 */
class ReductionsGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    @Test
    void reductionsMatchCpu() {
        long n = (3L << 20) + 5;
        MemorySegment x = F.floats(n, -3, 3, SEED);
        MemorySegment gX = F.up(x);
        // both sum squares of fp32 values exactly in float64; only the order differs: n·2⁻⁵³ relative
        assertThat(F.gpu.sumOfSquares(gX, n)).isCloseTo(F.cpu.sumOfSquares(x, n),
                org.assertj.core.data.Percentage.withPercentage(1e-9));
        assertThat(F.gpu.amax(gX, n)).isEqualTo(F.cpu.amax(x, n));
        assertThat(F.gpu.hasNonFinite(gX, n)).isFalse();
        assertThat(F.gpu.sumOfSquares(gX, 0)).isZero();
        assertThat(F.gpu.amax(gX, 0)).isZero();
        assertThat(F.gpu.hasNonFinite(gX, 0)).isFalse();

        x.setAtIndex(JAVA_FLOAT, n - 1, Float.NEGATIVE_INFINITY);
        MemorySegment gInf = F.up(x);
        assertThat(F.gpu.hasNonFinite(gInf, n)).isTrue();
        assertThat(F.gpu.amax(gInf, n)).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(F.gpu.sumOfSquares(gInf, n)).isInfinite();
        x.setAtIndex(JAVA_FLOAT, n / 2, Float.NaN);
        MemorySegment gNan = F.up(x);
        assertThat(F.gpu.hasNonFinite(gNan, n)).isTrue();
        assertThat(F.gpu.amax(gNan, n)).isNaN();
        assertThat(F.gpu.sumOfSquares(gNan, n)).isNaN();
    }
}
