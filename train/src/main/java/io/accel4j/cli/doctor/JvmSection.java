package io.accel4j.cli.doctor;

import io.accel4j.cli.Main;
import java.util.List;

/** The JVM running accel4j and whether it was launched with the flags the kernels need. */
final class JvmSection implements DoctorSection {

    @Override
    public String title() {
        return "JVM";
    }

    @Override
    public List<Line> lines() {
        boolean vector = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();
        boolean nativeAccess = JvmSection.class.getModule().isNativeAccessEnabled();
        return List.of(
                new Line("accel4j", Main.projectVersion()),
                new Line("version", Runtime.version() + " (" + System.getProperty("java.vm.name") + ")"),
                new Line("vendor", System.getProperty("java.vendor")),
                new Line("java.home", System.getProperty("java.home")),
                new Line("OS", System.getProperty("os.name") + " " + System.getProperty("os.version")
                        + " (" + System.getProperty("os.arch") + ")"),
                new Line("Vector API", vector ? "jdk.incubator.vector loaded"
                        : "NOT loaded: launch with --add-modules=jdk.incubator.vector (bin/accel4j does)"),
                new Line("native access", nativeAccess ? "enabled"
                        : "not enabled: launch with --enable-native-access=ALL-UNNAMED (bin/accel4j does)"));
    }
}
