package io.accel4j.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class TensorTest {

    @Test
    void rowMajorLayoutStridesAndElementAccess() {
        try (Arena arena = Arena.ofConfined()) {
            Tensor t = Tensor.allocate(arena, DType.FP32, 3, 5, 7);
            assertThat(t.shape()).containsExactly(3, 5, 7);
            assertThat(t.strides()).containsExactly(35, 7, 1);
            assertThat(t.size()).isEqualTo(105);
            assertThat(t.data().byteSize()).isEqualTo(105 * 4);
            assertThat(t.data().address() % 64).isZero();
            t.setFloat(2.5f, 2, 4, 6);
            assertThat(t.data().getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, 104)).isEqualTo(2.5f);
            assertThat(t.getFloat(2, 4, 6)).isEqualTo(2.5f);
            assertThat(t.dim(-1)).isEqualTo(7);
        }
    }

    @Test
    void transposeIsAViewAndReshapeNeedsContiguity() {
        try (Arena arena = Arena.ofConfined()) {
            Tensor t = Tensor.allocate(arena, DType.BF16, 4, 6);
            t.setFloat(3f, 1, 5);
            Tensor tt = t.transpose(0, 1);
            assertThat(tt.shape()).containsExactly(6, 4);
            assertThat(tt.getFloat(5, 1)).isEqualTo(3f);
            assertThat(tt.isContiguous()).isFalse();
            assertThatThrownBy(() -> tt.reshape(24)).hasMessageContaining("non-contiguous");
            assertThat(t.reshape(2, 12).getFloat(0, 11)).isEqualTo(3f);
            assertThatThrownBy(() -> t.reshape(5, 5))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("[4, 6] (24 elements)").hasMessageContaining("[5, 5] (25 elements)");
        }
    }

    @Test
    void badInputIsNamed() {
        try (Arena arena = Arena.ofConfined()) {
            assertThatThrownBy(() -> Tensor.allocate(arena, DType.FP32, 2, -1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("[2, -1]");
            MemorySegment small = arena.allocate(10);
            assertThatThrownBy(() -> Tensor.wrap(small, DType.FP16, 2, 3))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("needs 12 bytes")
                    .hasMessageContaining("has 10");
            Tensor t = Tensor.allocate(arena, DType.FP32, 2, 3);
            assertThatThrownBy(() -> t.requireShape("weight", 3, 2))
                    .hasMessage("weight must have shape [3, 2], got [2, 3]");
            assertThatThrownBy(() -> t.requireDType("weight", DType.BF16)).hasMessage("weight must be BF16, got FP32");
            assertThatThrownBy(() -> t.getFloat(2, 0)).isInstanceOf(IndexOutOfBoundsException.class)
                    .hasMessageContaining("[2, 0] is outside shape [2, 3]");
            assertThatThrownBy(() -> t.getFloat(1)).hasMessageContaining("rank 2");
        }
        Arena arena = Arena.ofConfined();
        Tensor t = Tensor.allocate(arena, DType.FP32, 4);
        arena.close();
        assertThatThrownBy(t::data).isInstanceOf(IllegalStateException.class).hasMessageContaining("freed");
    }
}
