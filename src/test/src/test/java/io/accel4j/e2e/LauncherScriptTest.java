package io.accel4j.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** bin/find-jdk.sh, the JDK discovery bin/accel4j and .ci/run share, run by bash as they run it. */
class LauncherScriptTest {

    private static Path root;
    private static String bash;

    @BeforeAll
    static void findBash() {
        root = Path.of(System.getProperty("accel4j.root", "../..")).toAbsolutePath().normalize();
        bash = List.of("/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash").stream()
                .filter(p -> Files.isExecutable(Path.of(p))).findFirst().orElse(null);
        assumeTrue(bash != null, "bash is not installed: the launcher scripts cannot be run here");
    }

    @Test
    void findsAJdk25OnThisMachine() throws Exception {
        Run r = findJdk(Map.of());

        assertThat(r.exitCode).as("stderr: %s", r.err).isZero();
        Path home = Path.of(r.out.strip());
        assertThat(home.resolve("bin/java")).isExecutable();
        Run version = run(List.of(home.resolve("bin/java").toString(), "-XshowSettings:properties", "-version"),
                Map.of());
        String spec = version.err.lines().filter(l -> l.strip().startsWith("java.specification.version"))
                .findFirst().orElseThrow().replaceAll("\\D", "");
        assertThat(Integer.parseInt(spec)).isGreaterThanOrEqualTo(25);
    }

    @Test
    void picksTheNewestJdk25AndPassesOverAnOldJavaHome(@TempDir Path jvms) throws Exception {
        for (String v : List.of("17.0.2", "25.0.3", "25.0.10", "25")) {
            fakeJdk(jvms.resolve("jdk-" + v), v);
        }

        Run r = findJdk(Map.of("JAVA_HOME", jvms.resolve("jdk-17.0.2").toString(),
                "ACCEL4J_JDK_SEARCH_PATH", jvms.toString()));

        assertThat(r.exitCode).as("stderr: %s", r.err).isZero();
        assertThat(r.out.strip()).isEqualTo(jvms.resolve("jdk-25.0.10").toString());
        assertThat(r.err).contains("JAVA_HOME=" + jvms.resolve("jdk-17.0.2") + " is JDK 17.0.2");
    }

    @Test
    void keepsAJavaHomeThatIsAJdk25(@TempDir Path jvms) throws Exception {
        fakeJdk(jvms.resolve("mine"), "25.0.1");
        fakeJdk(jvms.resolve("newer"), "26");

        Run r = findJdk(Map.of("JAVA_HOME", jvms.resolve("mine").toString(), "ACCEL4J_JDK_SEARCH_PATH", jvms.toString()));

        assertThat(r.exitCode).isZero();
        assertThat(r.out.strip()).isEqualTo(jvms.resolve("mine").toString());
        assertThat(r.err).isEmpty();
    }

    @Test
    void saysWhatToInstallWhenThereIsNone(@TempDir Path jvms) throws Exception {
        fakeJdk(jvms.resolve("jdk-21"), "21.0.5");

        Run r = findJdk(Map.of("JAVA_HOME", "", "ACCEL4J_JDK_SEARCH_PATH", jvms.toString()));

        assertThat(r.exitCode).isEqualTo(1);
        assertThat(r.out).isEmpty();
        assertThat(r.err.lines().toList()).singleElement().asString()
                .startsWith("accel4j: error: no JDK 25 or newer found")
                .contains(jvms.toString(), "apt-get install openjdk-25-jdk", "temurin-25-jdk", "JAVA_HOME");
    }

    @Test
    void theLauncherTakesItsJvmFlagsFromThePom() throws IOException {
        String launcher = Files.readString(root.resolve("bin/accel4j"));
        String pom = Files.readString(root.resolve("pom.xml"));

        assertThat(pom).contains("<accel4j.jvm.flags>");
        assertThat(launcher).contains("accel4j\\.jvm\\.flags").doesNotContain("jdk.incubator.vector");
        assertThat(root.resolve("bin/accel4j")).isExecutable();
    }

    @Test
    void theScriptsParse() throws Exception {
        for (String script : List.of("bin/accel4j", "bin/find-jdk.sh", ".ci/run")) {
            Run r = run(List.of(bash, "-n", root.resolve(script).toString()), Map.of());
            assertThat(r.exitCode).as("bash -n %s: %s", script, r.err).isZero();
        }
    }

    private record Run(int exitCode, String out, String err) {}

    /** Sources find-jdk.sh and calls accel4j_find_jdk; an empty value in env unsets that variable. */
    private static Run findJdk(Map<String, String> env) throws Exception {
        return run(List.of(bash, "-c", "source \"$1\" && accel4j_find_jdk", "find-jdk",
                root.resolve("bin/find-jdk.sh").toString()), env);
    }

    private static Run run(List<String> command, Map<String, String> env) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(new ArrayList<>(command));
        env.forEach((k, v) -> {
            if (v.isEmpty()) {
                pb.environment().remove(k);
            } else {
                pb.environment().put(k, v);
            }
        });
        Path out = Files.createTempFile("accel4j-script", ".out");
        Path err = Files.createTempFile("accel4j-script", ".err");
        try {
            Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("timed out after 60 s: " + command);
            }
            return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** A folder that looks like a JDK of the given version to the script: release file, bin/java, bin/javac. */
    private static void fakeJdk(Path home, String version) throws IOException {
        Files.createDirectories(home.resolve("bin"));
        Files.writeString(home.resolve("release"), "JAVA_VERSION=\"" + version + "\"\n", StandardCharsets.UTF_8);
        for (String tool : List.of("java", "javac")) {
            Path p = home.resolve("bin").resolve(tool);
            Files.writeString(p, "#!/bin/sh\nexit 0\n");
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
    }
}
