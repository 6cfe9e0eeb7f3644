package io.accel4j.cli.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code accel4j plan} in-process: the tables, JSON, the refusal when nothing fits, and its command line runs. */
class PlanCommandTest {

    @TempDir
    Path dir;

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void printsTheStatesTheLayoutsAndTheBestCommand() {
        Result r = run("plan", "--model", "gpt2-xl", "--global-batch", "512", "--devices", "64", "--device-memory",
                "32g");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("1,557,686,400 parameters", "DDP      4Ψ + 4Ψ + 8Ψ", "23.2 GiB",
                "ZeRO-3   (4Ψ + 4Ψ + 8Ψ)/N", "(assumed where not given: --tflops, --bandwidth)");
        // ZeRO-1 ties with DDP on time; with GELU recompute it fits 4 sequences a micro-batch, so fewer steps
        assertThat(r.out()).contains("best: ZeRO-1 with --recompute gelu, micro-batch 4 × 2");
        assertThat(r.out()).contains("  mpirun -np 64 bin/accel4j train --device cuda --model gpt2-xl --zero 1 "
                + "--recompute gelu --batch 4 --seq 1024 --grad-accum 2");
    }

    @Test
    void jsonHasEveryLayoutAndTheBest() {
        Result r = run("plan", "--dims", "12,768,12", "--global-batch", "16", "--devices", "2", "--device-memory",
                "24g", "--seq", "512", "--tflops", "50", "--bandwidth", "25", "--json");
        assertThat(r.code()).as(r.err()).isZero();
        String j = r.out().strip();
        assertThat(j).startsWith("{\"model\":{\"L\":12,\"C\":768,\"NH\":12,\"V\":50257,\"maxT\":1024,"
                + "\"parameters\":124475904}").endsWith("}").doesNotContain("\n");
        assertThat(j.split("\"strategy\"", -1)).hasSize(1 + 16); // 4 stages × none, gelu, layer, every:3
        assertThat(j).contains("\"flopsPerDevice\":5.00000e+13", "\"bandwidthBytesPerS\":2.50000e+10",
                "\"best\":\"mpirun -np 2 bin/accel4j train --device cuda --model <an llm.c model file of these "
                        + "dimensions>");
        assertThat(j.chars().filter(ch -> ch == '{').count()).isEqualTo(j.chars().filter(ch -> ch == '}').count());
    }

    @Test
    void nothingFitsIsOneLineWithTheNeedAndExitOne() {
        Result r = run("plan", "--model", "gpt2-xl", "--global-batch", "8", "--devices", "8", "--device-memory",
                "1g");
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).singleElement().asString()
                .startsWith("accel4j: error: does not fit: needs ")
                .contains(" per device, has 1.0 GiB (the smallest layout: ZeRO-3 with --recompute every:7, "
                        + "micro-batch 1)");
    }

    @Test
    void badOptionsAreUsageErrors() {
        String[][] cases = {
            {"--global-batch 10 --devices 4 --device-memory 8g", "--global-batch 10 is not a multiple of --devices 4"},
            {"--global-batch 8 --device-memory 8g --dims 12,768", "--dims must be L,C,NH[,V[,maxT]]"},
            {"--global-batch 8 --device-memory 8g --dims 12,770,12", "C (770) must be a multiple of NH (12)"},
            {"--global-batch 8 --device-memory 8g --seq 2048", "--seq must be in [1, 1024]"},
            {"--global-batch 8 --device-memory lots", "'lots' is not a size"},
            {"--global-batch 8 --device-memory 8g --model nope.bin", "--model nope.bin is neither a preset"},
            {"--global-batch 8 --device-memory 8g --device tpu", "--device must be cpu or cuda"},
            {"--global-batch 8 --device-memory 8g --tflops -1", "--tflops must be finite and > 0"},
        };
        for (String[] c : cases) {
            List<String> args = new ArrayList<>(List.of("plan"));
            args.addAll(Arrays.asList(c[0].split(" ")));
            Result r = run(args.toArray(String[]::new));
            assertThat(r.code()).as(c[0]).isEqualTo(2);
            assertThat(r.err()).as(c[0]).contains(c[1]);
        }
    }

    @Test
    void aCheckpointGivesTheDimensions() throws Exception {
        io.accel4j.train.model.GptConfig c = new io.accel4j.train.model.GptConfig(32, 100, 128, 3, 2, 16);
        Path model = dir.resolve("m.bin");
        try (io.accel4j.cpu.Parallel pool = new io.accel4j.cpu.Parallel(1);
             io.accel4j.train.model.Gpt2 g = new io.accel4j.train.model.Gpt2(c,
                     new io.accel4j.cpu.ops.CpuOps(pool), 1, 32)) {
            g.initialise(1);
            g.save(model);
        }
        Result r = run("plan", "--model", model.toString(), "--global-batch", "4", "--device-memory", "1g",
                "--device", "cpu");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("model: L=3, C=16, NH=2, V=100, maxT=32; " + String.format("%,d",
                c.parameterCount()) + " parameters", "  bin/accel4j train --model " + model + " --batch 4 --seq 32");
        Result bad = run("plan", "--model", dir.resolve("m.bin").getParent().toString(), "--global-batch", "4",
                "--device-memory", "1g");
        assertThat(bad.code()).isEqualTo(2);
    }

    @Test
    void theBestCommandForCpuRanksTrains() throws Exception {
        Result r = run("plan", "--model", "tiny", "--device", "cpu", "--devices", "2", "--global-batch", "8", "--seq",
                "32", "--device-memory", "64m");
        assertThat(r.code()).as(r.err()).isZero();
        String line = r.out().lines().filter(l -> l.startsWith("  bin/accel4j train")).findFirst().orElseThrow();
        List<String> args = new ArrayList<>(Arrays.asList(line.strip().split(" ")));
        assertThat(args.subList(0, 6)).containsExactly("bin/accel4j", "train", "--ranks", "2", "--model", "tiny");
        args.remove(0);
        args.addAll(List.of("--steps", "2", "--val-every", "0", "--eval-problems", "0", "--out",
                dir.resolve("run").toString(), "--threads", "1"));
        Result t = run(args.toArray(String[]::new));
        assertThat(t.code()).as(t.err()).isZero();
        assertThat(Files.exists(dir.resolve("run/model_00000002.bin"))).isTrue();
    }
}
