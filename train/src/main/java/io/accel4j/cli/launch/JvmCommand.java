package io.accel4j.cli.launch;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The command line that starts another accel4j process like this one: this JVM's {@code java}, its flags (the
 * {@code --add-modules}, {@code --enable-native-access}, {@code -D…} that {@code bin/accel4j} passed), its class path
 * and the CLI's main class, then the arguments. Debugger and agent flags are left out: two processes cannot listen
 * on one debugger port. The system property {@value #MAIN_PROPERTY} replaces the main class (tests run a stand-in
 * rank with it).
 */
final class JvmCommand {

    /** A different main class for the ranks (tests only). */
    static final String MAIN_PROPERTY = "accel4j.launch.main";
    static final String DEFAULT_MAIN = "io.accel4j.cli.Main";

    private JvmCommand() {}

    /** {@code java [this JVM's flags] -cp [this class path] main args…}. */
    static List<String> of(List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String flag : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!flag.startsWith("-agentlib:") && !flag.startsWith("-javaagent:") && !flag.startsWith("-Xrunjdwp")
                    && !flag.startsWith("-D" + MAIN_PROPERTY + "=")) {
                cmd.add(flag);
            }
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(System.getProperty(MAIN_PROPERTY, DEFAULT_MAIN));
        cmd.addAll(args);
        return cmd;
    }
}
