package io.accel4j.cli.doctor;

import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Locale;

/** Physical memory (as the JVM sees it, container limits included) and the heap the JVM may grow to. */
final class MemorySection implements DoctorSection {

    @Override
    public String title() {
        return "Memory";
    }

    @Override
    public List<Line> lines() {
        String total = "unknown";
        String free = "unknown";
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            total = gib(os.getTotalMemorySize());
            free = gib(os.getFreeMemorySize());
        }
        return List.of(
                new Line("total", total),
                new Line("free", free),
                new Line("JVM max heap", gib(Runtime.getRuntime().maxMemory())
                        + " (tensors live off-heap; -Xmx via ACCEL4J_JAVA_OPTS)"));
    }

    static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
    }
}
