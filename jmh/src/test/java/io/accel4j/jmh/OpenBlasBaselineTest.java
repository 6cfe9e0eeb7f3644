package io.accel4j.jmh;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.ref.GemmRef;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/** The baselines measure the same product as accel4j: OpenBLAS's row-major mapping of each layout, the fills. */
class OpenBlasBaselineTest {

    /** fp32 sums of K ≤ 64 terms of magnitude < 1, in a different order than the float64 reference: a few ulps of K. */
    private static final double TOLERANCE = 1e-4;

    @ParameterizedTest
    @EnumSource(Layout.class)
    void cblasComputesTheSameProductAsTheReference(Layout layout) {
        GemmShape s = GemmShape.parse("37x29x61:" + layout);
        try (GemmBuffers buf = new GemmBuffers(s, DType.FP32, DType.FP32, 7)) {
            buf.c.fill((byte) 0xFF); // NaN: beta = 0 must not read C
            OpenBlas.sgemm(s, OpenBlas.floats(buf.a), OpenBlas.floats(buf.b), OpenBlas.floats(buf.c));
            double[] want = GemmRef.gemmF64(layout, s.M(), s.N(), s.K(), 1, buf.a, DType.FP32, s.lda(), 1,
                    buf.b, DType.FP32, s.ldb(), 1, 0, buf.c, DType.FP32, s.ldc(), null);
            for (int i = 0; i < want.length; i++) {
                assertThat((double) buf.c.getAtIndex(ValueLayout.JAVA_FLOAT, i))
                        .as("%s C[%d, %d]", layout, i / s.N(), i % s.N()).isCloseTo(want[i],
                                org.assertj.core.api.Assertions.within(TOLERANCE));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"FP32", "BF16", "FP16", "FP8_E4M3", "FP8_E5M2"})
    void fillsAreFiniteBelowTwoAndNotAllZero(String type) {
        DType t = DType.valueOf(type);
        int n = 4096;
        try (var arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment seg = arena.allocate((long) n * t.byteSize());
            GemmBuffers.fillRandom(seg, t, n, new SplittableRandom(1));
            int nonZero = 0;
            for (int i = 0; i < n; i++) {
                float v = t.getFloat(seg, i);
                assertThat(Float.isFinite(v) && Math.abs(v) < 2).as("%s element %d = %s", t, i, v).isTrue();
                nonZero += v != 0 ? 1 : 0;
            }
            assertThat(nonZero).isGreaterThan(n / 2);
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void openBlasLoadsAndNamesItsCore(int threads) {
        OpenBlas.setThreads(threads);
        assertThat(OpenBlas.corename()).isNotBlank();
        assertThat(OpenBlas.describe()).contains("core=").contains("threads=" + threads);
    }
}
