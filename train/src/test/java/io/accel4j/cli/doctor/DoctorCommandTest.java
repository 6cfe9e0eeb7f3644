package io.accel4j.cli.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

class DoctorCommandTest {

    private record Fixed(String title, List<Line> lines) implements DoctorSection {}

    @Test
    void alignsValuesAcrossSectionsAndSurvivesAFailingSection() {
        DoctorSection failing = new DoctorSection() {
            @Override
            public String title() {
                return "CUDA";
            }

            @Override
            public List<Line> lines() {
                throw new ExceptionInInitializerError(new IllegalStateException("libcuda.so.1 not found"));
            }
        };
        StringWriter out = new StringWriter();

        DoctorCommand.print(List.of(
                new Fixed("A", List.of(new DoctorSection.Line("k", "v1"))),
                failing,
                new Fixed("B", List.of(new DoctorSection.Line("longer key", "v2")))), new PrintWriter(out, true));

        assertThat(out.toString().lines().toList()).containsExactly(
                "A",
                "  k           v1",
                "",
                "CUDA",
                "  error       libcuda.so.1 not found",
                "",
                "B",
                "  longer key  v2");
    }
}
