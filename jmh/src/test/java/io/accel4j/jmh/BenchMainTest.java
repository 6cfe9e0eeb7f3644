package io.accel4j.jmh;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class BenchMainTest {

    private static final String FLAGS = "--add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED";

    @Test
    void flagsComeFromTheFilteredResource() throws Exception {
        assertThat(BenchMain.jvmFlags()).contains("--add-modules=jdk.incubator.vector").doesNotContain("${");
    }

    @Test
    void flagsAreAddedAsOneJvmArgsAppend() {
        assertThat(BenchMain.withJvmFlags(new String[] {"GemmBench", "-f", "1"}, FLAGS))
                .containsExactly("-jvmArgsAppend", FLAGS, "GemmBench", "-f", "1");
    }

    @Test
    void theUsersJvmArgsAppendIsMergedAfterTheFlags() {
        assertThat(BenchMain.withJvmFlags(
                new String[] {"-jvmArgsAppend", "-Xmx4g -Dx=1", "Gemm", "-jvmArgsAppend=-Dy=2"}, FLAGS))
                .containsExactly("-jvmArgsAppend", FLAGS + " -Xmx4g -Dx=1 -Dy=2", "Gemm");
    }
}
