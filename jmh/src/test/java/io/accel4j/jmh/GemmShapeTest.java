package io.accel4j.jmh;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.gemm.Layout;
import org.junit.jupiter.api.Test;

class GemmShapeTest {

    @Test
    void namedShapesAreTheGpt2SmallMlpProducts() {
        assertThat(GemmShape.parse("gpt2-fwd")).isEqualTo(new GemmShape("gpt2-fwd", 1024, 3072, 768, Layout.NT));
        assertThat(GemmShape.parse("gpt2-dinp")).isEqualTo(new GemmShape("gpt2-dinp", 1024, 768, 3072, Layout.NN));
        assertThat(GemmShape.parse("gpt2-dw")).isEqualTo(new GemmShape("gpt2-dw", 3072, 768, 1024, Layout.TN));
    }

    @Test
    void lmHeadShapesAreTheTrainingStepsTiedHead() {
        assertThat(GemmShape.parse("lm-fwd")).isEqualTo(new GemmShape("lm-fwd", 256, 50304, 256, Layout.NT));
        assertThat(GemmShape.parse("lm-dinp")).isEqualTo(new GemmShape("lm-dinp", 256, 256, 50304, Layout.NN));
        assertThat(GemmShape.parse("lm-dw")).isEqualTo(new GemmShape("lm-dw", 50304, 256, 256, Layout.TN));
    }

    @Test
    void squareAndExplicitShapes() {
        GemmShape sq = GemmShape.parse("512");
        assertThat(sq.describe()).isEqualTo("512x512x512 NN");
        assertThat(sq.flops()).isEqualTo(2.0 * 512 * 512 * 512);
        GemmShape nt = GemmShape.parse("3x5x7:nt");
        assertThat(nt.layout()).isEqualTo(Layout.NT);
        assertThat(nt.lda()).isEqualTo(7);   // A stored M×K
        assertThat(nt.ldb()).isEqualTo(7);   // B stored N×K
        assertThat(nt.sizeB()).isEqualTo(35);
        GemmShape tn = GemmShape.parse("3x5x7:TN");
        assertThat(tn.lda()).isEqualTo(3);   // A stored K×M
        assertThat(tn.sizeA()).isEqualTo(21);
    }

    @Test
    void unknownShapesAreRefusedWithTheAccepted() {
        assertThatThrownBy(() -> GemmShape.parse("gpt3")).hasMessageContaining("unknown GEMM shape 'gpt3'")
                .hasMessageContaining("MxNxK");
        assertThatThrownBy(() -> GemmShape.parse("0")).hasMessageContaining("must be >= 1");
        assertThatThrownBy(() -> GemmShape.parse("4x4x4:XY")).hasMessageContaining("unknown GEMM shape");
        assertThatThrownBy(() -> GemmShape.parse("4x4")).hasMessageContaining("unknown GEMM shape");
        assertThatThrownBy(() -> GemmShape.parse("4x-4x4")).hasMessageContaining("unknown GEMM shape");
    }
}
