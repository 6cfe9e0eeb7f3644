package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.data.Mt19937;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Span;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class ParameterInitTest {

    /**
     * The sample standard deviation of n ≥ 4096 N(0, σ²) draws is within ~4σ/√(2n) ≤ 0.045σ of σ with overwhelming
     * probability; 10% leaves room and still catches a wrong scale (the residual scale is 0.5 here).
     */
    private static final double STD_TOLERANCE = 0.10;

    private static final GptConfig C = new GptConfig(64, 250, 256, 2, 4, 64); // V < Vp: padded rows

    @Test
    void followsGpt2sScheme() {
        ParameterLayout layout = new ParameterLayout(C);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(layout.fp32Bytes());
            p.fill((byte) 0xFF); // NaN: every element must be written
            ParameterInit.gpt2(layout, p, 42);

            for (Param w : new Param[] {Param.LN1W, Param.LN2W, Param.LNFW}) {
                assertRange(p, layout.tensor(w), 0, layout.count(w), 1f);
            }
            for (Param b : new Param[] {Param.LN1B, Param.QKVB, Param.ATTPROJB, Param.LN2B, Param.FCB,
                Param.FCPROJB, Param.LNFB}) {
                assertRange(p, layout.tensor(b), 0, layout.count(b), 0f);
            }
            Span wte = layout.tensor(Param.WTE);
            assertRange(p, wte, (long) C.V() * C.C(), wte.count(), 0f); // padded rows V..Vp-1
            assertStd(p, wte.offset(), (long) C.V() * C.C(), 0.02);
            double residual = 0.02 / Math.sqrt(2 * C.L());
            for (int l = 0; l < C.L(); l++) {
                for (Param w : new Param[] {Param.QKVW, Param.FCW}) {
                    Span t = layout.tensor(w);
                    assertStd(p, t.layerOffset(l), t.count() / C.L(), 0.02);
                }
                for (Param w : new Param[] {Param.ATTPROJW, Param.FCPROJW}) {
                    Span t = layout.tensor(w);
                    assertStd(p, t.layerOffset(l), t.count() / C.L(), residual);
                }
            }
            assertStd(p, layout.offset(Param.WPE), layout.count(Param.WPE), 0.02);
        }
    }

    /** llm.c's draw order: wte (V rows) first, then wpe, then layer 0's qkvw, … from one generator. */
    @Test
    void drawsInLlmcsOrderAndIsDeterministic() {
        ParameterLayout layout = new ParameterLayout(C);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(layout.fp32Bytes());
            MemorySegment b = arena.allocate(layout.fp32Bytes());
            ParameterInit.gpt2(layout, a, 7);
            ParameterInit.gpt2(layout, b, 7);
            assertThat(a.mismatch(b)).isEqualTo(-1);
            ParameterInit.gpt2(layout, b, 8);
            assertThat(a.mismatch(b)).isNotEqualTo(-1);

            Mt19937 rng = new Mt19937(7);
            float[] wte = new float[C.V() * C.C()];
            rng.normal(wte, 0, wte.length, 0f, 0.02f);
            float[] wpe = new float[C.maxT() * C.C()];
            rng.normal(wpe, 0, wpe.length, 0f, 0.02f);
            float[] qkvw0 = new float[3 * C.C() * C.C()];
            rng.normal(qkvw0, 0, qkvw0.length, 0f, 0.02f);
            assertThat(a.asSlice(0, 4L * wte.length).toArray(ValueLayout.JAVA_FLOAT)).containsExactly(wte);
            assertThat(a.asSlice(4 * layout.offset(Param.WPE), 4L * wpe.length).toArray(ValueLayout.JAVA_FLOAT))
                    .containsExactly(wpe);
            assertThat(a.asSlice(4 * layout.offset(Param.QKVW), 4L * qkvw0.length).toArray(ValueLayout.JAVA_FLOAT))
                    .containsExactly(qkvw0);
        }
    }

    @Test
    void aShortBufferIsRefused() {
        ParameterLayout layout = new ParameterLayout(C);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(layout.fp32Bytes() - 4);
            assertThatThrownBy(() -> ParameterInit.gpt2(layout, p, 1)).hasMessageContaining("needs");
        }
    }

    private static void assertRange(MemorySegment p, Span t, long from, long to, float value) {
        for (long i = from; i < to; i++) {
            assertThat(p.getAtIndex(ValueLayout.JAVA_FLOAT, t.offset() + i)).as("%s[%d]", t.param().fileName(), i)
                    .isEqualTo(value);
        }
    }

    private static void assertStd(MemorySegment p, long offset, long n, double std) {
        double sum = 0, sq = 0;
        for (long i = 0; i < n; i++) {
            double x = p.getAtIndex(ValueLayout.JAVA_FLOAT, offset + i);
            sum += x;
            sq += x * x;
        }
        double mean = sum / n;
        double sample = Math.sqrt(sq / n - mean * mean);
        assertThat(Math.abs(mean)).as("mean at %d", offset).isLessThan(5 * std / Math.sqrt(n));
        assertThat(sample / std).as("std at %d (n %d)", offset, n).isCloseTo(1.0,
                org.assertj.core.data.Offset.offset(STD_TOLERANCE));
    }
}
