package io.accel4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.data.Offset.offset;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.MethodModel;
import java.lang.classfile.attribute.CodeAttribute;
import org.junit.jupiter.api.Test;

/**
 * {@link FmaProbe}: what it reports and that it waited for the compiled round. Its speed is not asserted (a timed
 * test on a shared machine would be noise); the figure is checked against the kernels' GEMM in the benchmarks.
 */
class FmaProbeTest {

    @Test
    void theProbeMeasuresTheCompiledRoundAtTheKernelsWidth() {
        FmaProbe.Result r = FmaProbe.peak();
        assertThat(r.compiled()).as("the JIT compiled the round within %d ms", FmaProbe.COMPILE_WAIT_MS).isTrue();
        assertThat(r.lanes()).isEqualTo(Simd.lanes());
        assertThat(r.bits()).isEqualTo(Simd.bits());
        assertThat(r.rounds()).isPositive();
        assertThat(r.gflops()).isPositive().isFinite();
        assertThat(FmaProbe.peak()).as("measured once per JVM").isSameAs(r);
        assertThat(r.describe()).contains("GFLOP/s per core (measured: fp32 FMA, " + Simd.bits() + "-bit")
                .doesNotContain("NOT compiled");
    }

    @Test
    void aFractionIsOfThreadsTimesThePeak() {
        FmaProbe.Result r = new FmaProbe.Result(100, 16, 512, 10, true);
        assertThat(r.fraction(50, 1)).isCloseTo(0.5, offset(1e-12));
        assertThat(r.fraction(50, 2)).isCloseTo(0.25, offset(1e-12));
        assertThat(r.describe()).isEqualTo("100.0 GFLOP/s per core (measured: fp32 FMA, 512-bit, 16 lanes)");
        assertThat(new FmaProbe.Result(3, 1, 32, 1, false).describe())
                .isEqualTo("3.0 GFLOP/s per core (measured: fp32 FMA, 32-bit, 1 lane; NOT compiled in time: too low)");
    }

    /** C2 inlines a hot callee only up to this many bytes of bytecode (HotSpot's {@code FreqInlineSize} on x86). */
    private static final int FREQ_INLINE_SIZE = 325;

    @Test
    void theRoundsAreTooBigForC2ToInlineIntoTheTimingLoop() throws IOException {
        // inlined into measure()'s loop compiled on stack replacement, the round ran at half speed on Zen 3
        for (String round : new String[] {"vectorRound", "scalarRound"}) {
            assertThat(codeLength(round)).as("%s's bytecode length", round).isGreaterThan(FREQ_INLINE_SIZE);
        }
    }

    private static int codeLength(String method) throws IOException {
        try (InputStream in = FmaProbe.class.getResourceAsStream("FmaProbe.class")) {
            assertThat(in).as("FmaProbe.class on the class path").isNotNull();
            return ClassFile.of().parse(in.readAllBytes()).methods().stream()
                    .filter(m -> m.methodName().equalsString(method))
                    .map(MethodModel::code).flatMap(java.util.Optional::stream)
                    .mapToInt(c -> ((CodeAttribute) c).codeLength())
                    .findFirst().orElseThrow(() -> new AssertionError("no method " + method + " in FmaProbe"));
        }
    }
}
