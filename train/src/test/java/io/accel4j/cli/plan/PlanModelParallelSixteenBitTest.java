package io.accel4j.cli.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.cli.train.TensorParallelPlan;
import io.accel4j.core.DType;
import io.accel4j.optim.AdamW;
import io.accel4j.pipeline.Gpt2Stages;
import io.accel4j.pipeline.Partition;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.Schedule;
import io.accel4j.pipeline.StagePlan;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.Planner;
import io.accel4j.train.precision.Precision;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code plan --model-parallel --bf16}'s tensor, pipeline and tp × pp rows in 16 bits ({@code …+bf16}): each the
 * trainer's own plan with 16-bit storage ({@link TensorParallelPlan}, {@link StagePlan}, each tested against what the
 * Learner allocates), smaller than the same layout in fp32, a larger micro-batch at a budget between the two, and the
 * printed commands train with the planned memory.
 */
class PlanModelParallelSixteenBitTest {

    @TempDir
    Path dir;

    private int runs;

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void everySixteenBitRowIsTheTrainersPlanAndSmallerThanFp32s() {
        GptConfig c = GptConfig.TINY;
        int n = 4, T = 16;
        Cluster cluster = new Cluster(n, 1L << 40, 1e11, 1e14);
        List<Layout> rows = new Planner(List.of(new ModelParallelLayouts(DType.BF16))).plan(c, 8, T, cluster).all();
        int tensor = 0, pipe = 0;
        for (Layout l : rows) {
            int t = l.tensorParallel(), p = l.pipelineStages(), d = l.dataParallel();
            assertThat(l.strategy()).endsWith("+bf16");
            assertThat(l.trainArgs()).startsWith("--precision", "bf16");
            assertThat(l.recompute()).isEqualTo(Recompute.NONE);
            long want;
            if (p > 1) {
                Gpt2Stages stages = t > 1 ? Gpt2Stages.parallel(c) : Gpt2Stages.of(c);
                PipelineRank.Options o = new PipelineRank.Options(l.microBatch(), T, l.accumulation(), c.V(), c.V(),
                        DType.BF16, Recompute.NONE, AdamW.of(0.01f), step -> 0f, 0f, 1, DType.BF16);
                want = 0;
                for (int s = 0; s < p; s++) {
                    StagePlan sp = StagePlan.of(stages, Partition.balanced(stages.parameters(), p),
                            Schedule.ONE_F_ONE_B, o, s, t, 0, d, l.zeroStage());
                    assertThat(sp.workingBytes()).isPositive();
                    want = Math.max(want, sp.total());
                }
                pipe++;
            } else {
                TrainConfig cfg = TrainConfig.builder().precision(Precision.of(DType.BF16)).batch(l.microBatch())
                        .seq(T).steps(1).zeroStage(l.zeroStage()).build();
                want = TensorParallelPlan.of(c, cfg, t, n).total();
                tensor++;
            }
            assertThat(l.bytesPerDevice()).as(l.strategy() + " " + l.trainArgs()).isEqualTo(want);
            Layout fp32 = new ModelParallelLayouts().layout(c, T, cluster, t, p, l.zeroStage(), Recompute.NONE,
                    l.microBatch(), l.accumulation());
            assertThat(l.bytesPerDevice()).as(l.strategy()).isLessThan(fp32.bytesPerDevice());
            // (the parameters may be another stage's: the largest stage in 16 bits need not be fp32's largest)
            assertThat(l.trainArgs().subList(2, l.trainArgs().size())).isEqualTo(fp32.trainArgs());
        }
        // TP2, TP2+Z1, TP4; PP2, PP2+Z1, TP2×PP2 (what the fp32 source gives, without its layer-recompute rows)
        assertThat(new int[] {tensor, pipe}).containsExactly(3, 3);
    }

    @Test
    void atABudgetBetweenTheTwoTheSixteenBitPipelineTakesTheLargerMicroBatch() {
        GptConfig c = GptConfig.TINY;
        int T = 16;
        Cluster big = new Cluster(2, 1L << 40, 1e11, 1e14);
        // PP2 on 2 devices, 8 sequences a step: B = 4 (M = 2) is the largest that 1F1B takes
        long half = new ModelParallelLayouts(DType.BF16).layout(c, T, big, 1, 2, 0, Recompute.NONE, 4, 2)
                .bytesPerDevice();
        long full = new ModelParallelLayouts().layout(c, T, big, 1, 2, 0, Recompute.NONE, 4, 2).bytesPerDevice();
        assertThat(half).isLessThan(full);
        Cluster budget = new Cluster(2, half, 1e11, 1e14);
        Planner.Result res = new Planner(List.of(new ModelParallelLayouts(), new ModelParallelLayouts(DType.BF16)))
                .plan(c, 8, T, budget);
        Layout b16 = pick(res, "PP2+bf16"), b32 = pick(res, "PP2");
        assertThat(b16.microBatch()).isEqualTo(4);
        assertThat(b32.microBatch()).isLessThan(4);
        assertThat(b16.bytesPerDevice()).isLessThanOrEqualTo(half);
    }

    /**
     * GPT-2 124M at T = 1024 on 4 devices of 6 GiB, 64 sequences a step: every tensor, pipeline and tp × pp layout
     * keeps the largest micro-batch that fits; with 16-bit storage that is at least fp32's, and larger where the
     * activations are what limits it (the figures of docs/PERFORMANCE.md).
     */
    @Test
    void atAFixedBudgetTheSixteenBitRowsTakeMicroBatchesAtLeastAsLarge() {
        GptConfig g = GptConfig.preset("gpt2");
        long budget = 6L << 30;
        Planner.Result res = new Planner(List.of(new ModelParallelLayouts(), new ModelParallelLayouts(DType.BF16)))
                .plan(g, 64, 1024, new Cluster(4, budget, 1e11, 1e14));
        int larger = 0;
        for (Layout l : res.all()) {
            if (l.strategy().endsWith("+bf16") || l.recompute() != Recompute.NONE) {
                continue;
            }
            Layout b = pick(res, l.strategy() + "+bf16");
            System.out.printf(Locale.ROOT, "gpt2 %s at 6 GiB: fp32 B=%d (%.0f MiB), bf16 B=%d (%.0f MiB)%n",
                    l.strategy(), l.microBatch(), l.bytesPerDevice() / 1048576.0, b.microBatch(),
                    b.bytesPerDevice() / 1048576.0);
            assertThat(b.microBatch()).as(l.strategy()).isGreaterThanOrEqualTo(l.microBatch());
            larger += b.microBatch() > l.microBatch() ? 1 : 0;
        }
        assertThat(larger).isPositive();
    }

    @Test
    void sixteenBitRowsCommandsTrainWithThePlannedMemory() {
        for (String name : List.of("TP2+bf16", "PP2+bf16", "TP2×PP2+bf16")) {
            int n = name.startsWith("TP2×") ? 4 : 2;
            Planner.Result res = new Planner(List.of(new ModelParallelLayouts(DType.BF16))).plan(GptConfig.TINY, 8, 8,
                    new Cluster(n, 1L << 30, 1e11, 1e14));
            Layout l = pick(res, name);
            Result t = train("  bin/accel4j train --ranks " + n + " --model tiny " + String.join(" ", l.trainArgs()));
            String mib = String.format(Locale.ROOT, "%.1f", l.bytesPerDevice() / 1048576.0);
            if (l.pipelineStages() == 1) {
                assertThat(t.out()).as(name).contains("saved activations in BF16", "; " + mib + " MiB in all");
                continue;
            }
            assertThat(t.out()).contains("saved activations in BF16", " MiB fp32 working set");
            double most = t.out().lines().filter(x -> x.contains(" per rank: parameters "))
                    .mapToDouble(x -> Double.parseDouble(x.replaceAll(".*; ([0-9.]+) MiB in all", "$1"))).max()
                    .orElseThrow();
            assertThat(most).as(name).isEqualTo(Double.parseDouble(mib));
        }
    }

    @Test
    void theCommandLinePrintsTheSixteenBitRowsWithModelParallel() {
        Result r = run("plan", "--model", "tiny", "--device", "cpu", "--devices", "4", "--global-batch", "8", "--seq",
                "16", "--device-memory", "1g", "--model-parallel", "--bf16", "--json");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("{\"strategy\":\"TP2+bf16\",", "\"PP2+Z1+bf16\"", "\"TP2×PP2+bf16\"",
                "TP/PP rows without recompute");
        Result without = run("plan", "--model", "tiny", "--device", "cpu", "--devices", "4", "--global-batch", "8",
                "--seq", "16", "--device-memory", "1g", "--model-parallel", "--json");
        assertThat(without.out()).doesNotContain("+bf16");
    }

    private static Layout pick(Planner.Result res, String name) {
        return res.all().stream().filter(l -> l.strategy().equals(name)).findFirst().orElseThrow(() ->
                new AssertionError(name + " not among " + res.all().stream().map(Layout::strategy).toList()));
    }

    /** Runs a printed command line's train for one step in this process. */
    private Result train(String line) {
        List<String> args = new ArrayList<>(Arrays.asList(line.strip().split(" ")));
        args.remove(0);
        args.addAll(List.of("--steps", "1", "--val-every", "0", "--eval-problems", "0", "--out",
                dir.resolve("run" + runs++).toString(), "--threads", "1"));
        Result t = run(args.toArray(String[]::new));
        assertThat(t.code()).as(t.err()).isZero();
        return t;
    }
}
