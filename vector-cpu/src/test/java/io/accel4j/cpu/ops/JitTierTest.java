package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The kernels' results do not depend on which JIT tier runs them: in a fresh JVM, LayerNorm's first call (the
 * interpreter: the Vector API's Java fallbacks) and its 30,000th (C2: the intrinsics) give the same bits, as does a
 * JVM that only interprets. A lane reduction whose order is left to the implementation ({@code reduceLanes(ADD)})
 * breaks this (it did: the first and last digests differed), and with it the run-to-run reproducibility of
 * training: the same run rounded differently depending on when the kernels got compiled.
 */
class JitTierTest {

    @Test
    void layerNormGivesTheSameBitsInterpretedAndCompiled() throws Exception {
        List<String> warming = digests("30000");
        assertThat(warming).as("the first and the last call's digests").hasSize(2);
        assertThat(warming.get(1)).as("C2-compiled vs interpreted").isEqualTo(warming.get(0));
        assertThat(digests("1", "-Xint")).containsExactly(warming.get(0));
    }

    private static List<String> digests(String rounds, String... jitFlags) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of(jitFlags));
        cmd.add("--add-modules=jdk.incubator.vector");
        String width = System.getProperty(io.accel4j.cpu.Simd.BITS_PROPERTY);
        if (width != null) {
            cmd.add("-D" + io.accel4j.cpu.Simd.BITS_PROPERTY + "=" + width);
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), JitTierMain.class.getName(), rounds));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the JVM with " + List.of(jitFlags) + " did not finish within 120 s");
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.exitValue()).as(out).isZero();
        return out.lines().filter(l -> l.startsWith("digest ")).toList();
    }
}
