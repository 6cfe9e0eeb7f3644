package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class FlopsTest {

    @Test
    void attentionForwardIsTwoMatmulsOfTSquaredByHd() {
        // B 2, NH 3, T 5, hd 7: S = Q·Kᵀ and O = P·V are 2·3·5·5·7 multiply-adds each: 2 · 2 · 1050 FLOP
        assertThat(Flops.attentionForward(2, 3, 5, 7, false)).isEqualTo(4200.0);
        assertThat(Flops.attentionForward(2, 3, 5, 7, true)).isEqualTo(2100.0);
    }

    @Test
    void attentionBackwardIsTwoAndAHalfForwards() {
        assertThat(Flops.attentionBackward(2, 3, 5, 7, false)).isEqualTo(10500.0);
        assertThat(Flops.attentionForwardBackward(2, 3, 5, 7, true)).isEqualTo(3.5 * 2100);
    }

    @Test
    void attentionAtFlashAttentionsShapesDoesNotOverflow() {
        // B·T 16k, T 16k, NH 16, hd 128: 4·1·16·2²⁸·128 = 2⁴¹ exactly, far past an int or a float's 2²⁴ of integers
        assertThat(Flops.attentionForward(1, 16, 16384, 128, false)).isEqualTo(Math.pow(2, 41));
        // the same token count at any T: the work grows with T (B·T² = 16k·T)
        assertThat(Flops.attentionForward(32, 32, 512, 64, true) * 32)
                .isEqualTo(Flops.attentionForward(1, 32, 16384, 64, true));
    }

    @Test
    void gemmIsTwoMNK() {
        assertThat(Flops.gemm(8192, 8192, 8192)).isEqualTo(Math.pow(2, 40));
        assertThat(Flops.gemm(8192, 50304, 768)).isEqualTo(2.0 * 8192 * 50304 * 768);
        assertThat(Flops.gemm(3, 5, 7)).isEqualTo(210.0);
    }

    @Test
    void adamwMovesSevenFloatsAParameterAndTheCopyTwiceItsBytes() {
        assertThat(Flops.adamwBytes(1000, false)).isEqualTo(28_000.0);
        assertThat(Flops.adamwBytes(1000, true)).isEqualTo(30_000.0);
        assertThat(Flops.copyBytes(14_000)).isEqualTo(Flops.adamwBytes(1000, false));
    }

    @Test
    void sizesMustBePositiveAndAreNamed() {
        assertThatThrownBy(() -> Flops.attentionForward(1, 0, 5, 7, true)).hasMessage("NH must be >= 1, got 0");
        assertThatThrownBy(() -> Flops.gemm(1, 2, -3)).hasMessage("K must be >= 1, got -3");
        assertThatThrownBy(() -> Flops.adamwBytes(0, false)).hasMessage("n must be >= 1, got 0");
    }
}
