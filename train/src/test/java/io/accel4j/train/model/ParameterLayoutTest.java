package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Span;
import java.util.List;
import org.junit.jupiter.api.Test;

class ParameterLayoutTest {

    @Test
    void gpt2SmallHasLlmcsParameterCount() {
        // llm.c prints num_parameters: 124475904 for gpt2_124M.bin (padded vocabulary)
        assertThat(new ParameterLayout(GptConfig.GPT2).count()).isEqualTo(124_475_904L);
        assertThat(GptConfig.GPT2.parameterCount()).isEqualTo(124_475_904L);
    }

    @Test
    void tensorsAreInLlmcOrderWithTheirShapesAndContiguous() {
        GptConfig c = new GptConfig(5, 7, 9, 3, 2, 4);
        ParameterLayout layout = new ParameterLayout(c);
        long[][] shapes = {
            {9, 4}, {5, 4}, {3, 4}, {3, 4}, {3, 12, 4}, {3, 12}, {3, 4, 4}, {3, 4}, {3, 4}, {3, 4},
            {3, 16, 4}, {3, 16}, {3, 4, 16}, {3, 4}, {4}, {4}};
        List<Span> tensors = layout.tensors();
        assertThat(tensors).extracting(Span::param).containsExactly(Param.values());
        assertThat(tensors).extracting(t -> t.param().fileName()).containsExactly("wte", "wpe", "ln1w", "ln1b",
                "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw",
                "lnfb");
        long offset = 0;
        for (Span t : tensors) {
            long[] expected = shapes[t.param().ordinal()];
            assertThat(t.shape()).as(t.param().fileName()).containsExactly(expected);
            assertThat(t.offset()).as(t.param().fileName()).isEqualTo(offset);
            long n = 1;
            for (long d : expected) {
                n *= d;
            }
            assertThat(t.count()).isEqualTo(n);
            assertThat(layout.offset(t.param())).isEqualTo(offset);
            assertThat(layout.count(t.param())).isEqualTo(n);
            offset += n;
        }
        assertThat(layout.count()).isEqualTo(offset).isEqualTo(ParameterLayout.count(c));
        assertThat(layout.fp32Bytes()).isEqualTo(4 * offset);
        Span qkvw = layout.tensor(Param.QKVW);
        assertThat(qkvw.layerOffset(2)).isEqualTo(qkvw.offset() + 2 * 12 * 4);
        long[] shape = layout.shape(Param.WTE);
        shape[0] = 0;
        assertThat(layout.shape(Param.WTE)[0]).as("shape() is a copy").isEqualTo(9);
    }

    @Test
    void theUnitsCoverTheLayoutOnceInFlatOrder() {
        GptConfig c = new GptConfig(5, 7, 9, 3, 2, 4);
        ParameterLayout layout = new ParameterLayout(c);
        List<ParameterLayout.Unit> units = layout.units();
        assertThat(units).hasSize(c.L() + 2);
        assertThat(layout.finalUnit()).isEqualTo(c.L() + 1);
        long[] owner = new long[(int) layout.count()];
        java.util.Arrays.fill(owner, -1);
        for (ParameterLayout.Unit u : units) {
            long packed = 0;
            for (ParameterLayout.Segment s : u.segments()) {
                assertThat(s.packed()).as("%s packed after the segments before it", s).isEqualTo(packed);
                assertThat(layout.unitOf(s.param(), s.layer())).isEqualTo(u.index());
                assertThat(layout.packedOffset(s.param(), s.layer())).isEqualTo(s.packed());
                assertThat(layout.offset(s.param(), s.layer())).as("%s offset", s).isEqualTo(s.offset());
                assertThat(layout.count(s.param(), s.layer())).as("%s count", s).isEqualTo(s.count());
                for (long i = s.offset(); i < s.offset() + s.count(); i++) {
                    assertThat(owner[(int) i]).as("element %d in one unit", i).isEqualTo(-1);
                    owner[(int) i] = u.index();
                }
                packed += s.count();
            }
            assertThat(u.count()).isEqualTo(packed);
        }
        assertThat(owner).doesNotContain(-1L);
        // a layer is its 12 slices: 12C² + 13C; the embeddings wte + wpe; the final LayerNorm 2C
        int C = c.C();
        assertThat(units.get(ParameterLayout.layerUnit(1)).count()).isEqualTo(12L * C * C + 13L * C);
        assertThat(units.get(ParameterLayout.EMBEDDING).count()).isEqualTo((long) c.Vp() * C + (long) c.maxT() * C);
        assertThat(units.get(layout.finalUnit()).count()).isEqualTo(2L * C);
        assertThat(units.get(ParameterLayout.layerUnit(2)).segments().get(0).offset())
                .isEqualTo(layout.tensor(Param.LN1W).layerOffset(2));
    }

    @Test
    void overflowingSizesAreArithmeticExceptions() {
        assertThatThrownBy(() -> ParameterLayout.count(1, 1, Integer.MAX_VALUE, Integer.MAX_VALUE))
                .isInstanceOf(ArithmeticException.class);
        assertThat(ParameterLayout.count(1024, 50304, 12, 768)).isEqualTo(124_475_904L);
    }

    @Test
    void configsAreValidatedAndPresetsNamed() {
        assertThat(GptConfig.preset("gpt2")).isEqualTo(new GptConfig(1024, 50257, 50304, 12, 12, 768));
        assertThat(GptConfig.preset("bench")).isEqualTo(new GptConfig(256, 50257, 50304, 4, 4, 256));
        GptConfig tiny = GptConfig.preset("tiny");
        assertThat(tiny.V()).isEqualTo(256);
        assertThat(tiny.headSize()).isEqualTo(16);
        assertThat(tiny.parameterCount()).isBetween(100_000L, 150_000L);
        assertThat(GptConfig.presetNames()).containsExactly("gpt2", "tiny", "bench", "tiny-bpe", "gpt2-medium",
                "gpt2-large", "gpt2-xl");
        assertThatThrownBy(() -> GptConfig.preset("gpt5")).hasMessage(
                "unknown model preset 'gpt5': one of [gpt2, tiny, bench, tiny-bpe, gpt2-medium, gpt2-large, gpt2-xl]");
        assertThatThrownBy(() -> new GptConfig(0, 1, 1, 1, 1, 1)).hasMessage("maxT must be >= 1, got 0");
        assertThatThrownBy(() -> new GptConfig(1, 1, 1, -1, 1, 1)).hasMessage("L must be >= 1, got -1");
        assertThatThrownBy(() -> new GptConfig(1, 1, 1, 1, 3, 8)).hasMessage("C (8) must be a multiple of NH (3)");
        assertThatThrownBy(() -> new GptConfig(1, 5, 4, 1, 1, 1)).hasMessage("Vp (4) must be at least V (5)");
    }
}
