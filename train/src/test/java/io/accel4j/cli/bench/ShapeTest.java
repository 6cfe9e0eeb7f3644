package io.accel4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.gemm.Layout;
import org.junit.jupiter.api.Test;

class ShapeTest {

    @Test
    void parsesCubesAndTriples() {
        assertThat(Shape.parse("512")).isEqualTo(new Shape(512, 512, 512));
        assertThat(Shape.parse(" 256x1024X64 ")).isEqualTo(new Shape(256, 1024, 64));
        assertThat(Shape.parse("2×3×4")).isEqualTo(new Shape(2, 3, 4));
        assertThat(new Shape(2, 3, 4)).hasToString("2x3x4");
        assertThat(new Shape(2, 3, 4).flops()).isEqualTo(48.0);
    }

    @Test
    void rejectsWhatIsNotASize() {
        for (String bad : new String[] {"banana", "", "1x2", "1x2x3x4", "0", "-5", "3x0x2", "99999999"}) {
            assertThatThrownBy(() -> Shape.parse(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("'" + bad + "'");
        }
    }

    @Test
    void namesDtypesAndLayoutsBothWays() {
        assertThat(Names.dtype("FP8")).isEqualTo(DType.FP8_E4M3);
        assertThat(Names.dtype("fp8-e5m2")).isEqualTo(DType.FP8_E5M2);
        assertThat(Names.name(DType.FP8_E4M3)).isEqualTo("fp8_e4m3");
        for (DType t : DType.values()) {
            assertThat(Names.dtype(Names.name(t))).isEqualTo(t);
        }
        assertThat(Names.layout("nt")).isEqualTo(Layout.NT);
        assertThatThrownBy(() -> Names.dtype("fp64")).hasMessageContaining("fp32, bf16, fp16, fp8_e4m3, fp8_e5m2");
        assertThatThrownBy(() -> Names.layout("XY")).hasMessageContaining("NN, NT, TN, TT");
    }

    @Test
    void formatsAboutThreeSignificantDigits() {
        assertThat(Table.num(1234.5)).isEqualTo("1235");
        assertThat(Table.num(12.345)).isEqualTo("12.3");
        assertThat(Table.num(1.2345)).isEqualTo("1.23");
        assertThat(Table.num(0.012345)).isEqualTo("0.0123");
    }

    @Test
    void theToleranceGrowsWithKAndStaysBelowAWrongAnswer() {
        assertThat(GemmBenchCommand.tolerance(256)).isGreaterThan(GemmBenchCommand.tolerance(32)).isLessThan(0.01);
    }
}
