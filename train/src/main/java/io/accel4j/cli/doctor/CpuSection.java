package io.accel4j.cli.doctor;

import java.util.ArrayList;
import java.util.List;

/** The CPU: model, processors and the vector features the kernels care about. */
final class CpuSection implements DoctorSection {

    private final CpuInfo info;

    CpuSection(CpuInfo info) {
        this.info = info;
    }

    @Override
    public String title() {
        return "CPU";
    }

    @Override
    public List<Line> lines() {
        List<Line> lines = new ArrayList<>();
        lines.add(new Line("model", info.model()));
        lines.add(new Line("processors", Runtime.getRuntime().availableProcessors() + " available to the JVM"));
        if (info.flags().isEmpty()) {
            lines.add(new Line("features", "unknown (" + info.source() + ")"));
        } else {
            List<String> present = info.present();
            List<String> absent = info.absent();
            lines.add(new Line("features", present.isEmpty() ? "none of interest" : String.join(" ", present)));
            lines.add(new Line("absent", absent.isEmpty() ? "none" : String.join(" ", absent)));
        }
        return lines;
    }
}
