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
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.DataParallelLayouts;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.MemoryPlan;
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
 * {@code plan --model-parallel --bf16}: the tensor, pipeline and tp × pp rows are the trainer's own plans
 * ({@link TensorParallelPlan}, {@link StagePlan}, each tested against the Learner's allocation) and the +bf16 rows
 * {@link MemoryPlan} with 16-bit storage (tested against the trainer's); a budget only TP (or only PP) fits picks
 * it; the printed commands train, and what train then prints as its memory per rank is the plan's figure.
 */
class PlanModelParallelTest {

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

    private static Planner planner() {
        return new Planner(List.of(new DataParallelLayouts(), new DataParallelLayouts(DType.BF16),
                new ModelParallelLayouts()));
    }

    @Test
    void everyRowIsTheTrainersOwnPlan() {
        GptConfig c = GptConfig.TINY;
        int n = 4, T = 16;
        Planner.Result res = planner().plan(c, 8, T, new Cluster(n, 1L << 40, 1e11, 1e14));
        int tensor = 0, pipe = 0, both = 0, bf16 = 0;
        for (Layout l : res.all()) {
            int t = l.tensorParallel(), p = l.pipelineStages(), d = l.dataParallel();
            assertThat(t * p * d).as(l.strategy()).isEqualTo(n);
            assertThat((long) l.microBatch() * l.accumulation() * d).as(l.strategy()).isEqualTo(8);
            long want;
            if (p > 1) {
                assertThat(l.accumulation()).isGreaterThanOrEqualTo(p); // 1F1B: M >= P
                Gpt2Stages stages = t > 1 ? Gpt2Stages.parallel(c) : Gpt2Stages.of(c);
                PipelineRank.Options o = new PipelineRank.Options(l.microBatch(), T, l.accumulation(), c.V(), c.V(),
                        DType.FP32, l.recompute(), AdamW.of(0.01f), step -> 0f, 0f, 1);
                want = 0;
                for (int s = 0; s < p; s++) {
                    want = Math.max(want, StagePlan.of(stages, Partition.balanced(stages.parameters(), p),
                            Schedule.ONE_F_ONE_B, o, s, t, 0, d, l.zeroStage()).total());
                }
                both += t > 1 ? 1 : 0;
                pipe += t > 1 ? 0 : 1;
            } else if (t > 1) {
                TrainConfig cfg = TrainConfig.builder().precision(Precision.FP32).batch(l.microBatch()).seq(T)
                        .steps(1).zeroStage(l.zeroStage()).build();
                want = TensorParallelPlan.of(c, cfg, t, n).total();
                tensor++;
            } else {
                DType storage = l.strategy().endsWith("+bf16") ? DType.BF16 : DType.FP32;
                bf16 += storage == DType.BF16 ? 1 : 0;
                want = MemoryPlan.of(c, l.microBatch(), T, l.recompute(), l.zeroStage(), n, storage).total();
                assertThat(l.trainArgs().contains("bf16")).isEqualTo(storage == DType.BF16);
            }
            assertThat(l.bytesPerDevice()).as(l.strategy() + " " + l.trainArgs()).isEqualTo(want);
        }
        // TP2, TP2+Z1, TP4; PP2, PP2+Z1 × (none, layer); TP2×PP2 × (none, layer); 4 stages × 3 recomputes in bf16
        assertThat(new int[] {tensor, pipe, both, bf16}).containsExactly(3, 4, 2, 12);
    }

    @Test
    void aBudgetOnlyTensorParallelismFitsPicksItAndItsCommandTrainsWithThePlannedMemory() {
        // tiny on 2 devices, 8 × 8 tokens, at their smallest micro-batch: TP2 needs 1.08 MB, PP2 1.31 MB, ZeRO-1 1.52
        Result r = run("plan", "--model", "tiny", "--device", "cpu", "--devices", "2", "--global-batch", "8", "--seq",
                "8", "--device-memory", "1200000", "--model-parallel");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("best: TP2 with --recompute none");
        Layout best = planner().plan(GptConfig.TINY, 8, 8, new Cluster(2, 1200000, 1e11, 1e14)).best();
        assertThat(best.strategy()).isEqualTo("TP2");
        String line = r.out().lines().filter(l -> l.startsWith("  bin/accel4j train")).findFirst().orElseThrow();
        assertThat(line).startsWith("  bin/accel4j train --ranks 2 --model tiny --tp 2 ");
        Result t = train(line);
        assertThat(t.out()).contains(String.format(Locale.ROOT, "memory per rank (1 data-parallel × 2 tensor)"),
                String.format(Locale.ROOT, "; %.1f MiB in all", best.bytesPerDevice() / 1048576.0));
    }

    @Test
    void aBudgetOnlyPipelineFitsPicksIt() {
        // 8 layers of 192 channels and 3 heads (which do not split over 2) on 2 devices at 8 × 8 tokens: PP2 needs
        // about 30 MB, ZeRO-3 about 36 MB
        Result r = run("plan", "--dims", "8,192,3,256,256", "--device", "cpu", "--devices", "2", "--global-batch",
                "8", "--seq", "8", "--device-memory", "33000000", "--model-parallel");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("best: PP2 with --recompute none, micro-batch ", "  bin/accel4j train --ranks 2 "
                + "--model <an llm.c model file of these dimensions> --pp 2 --micro-batches ", " --schedule-pp 1f1b");
    }

    @Test
    void pipelineRowsCommandsTrainWithThePlannedMemory() {
        for (String name : List.of("PP2", "TP2×PP2")) {
            int n = name.startsWith("TP") ? 4 : 2;
            Planner.Result res = planner().plan(GptConfig.TINY, 8, 8, new Cluster(n, 1L << 30, 1e11, 1e14));
            Layout pp = res.all().stream().filter(l -> l.strategy().equals(name)
                    && l.recompute() == io.accel4j.train.model.Recompute.NONE).findFirst().orElseThrow();
            Result t = train("  bin/accel4j train --ranks " + n + " --model tiny " + String.join(" ", pp.trainArgs()));
            assertThat(t.out()).contains("pipeline: 2 stages" + (n == 4 ? " × 2 tensor ranks" : "") + ", "
                    + pp.accumulation() + " micro-batches, 1f1b");
            double most = t.out().lines().filter(l -> l.contains(" per rank: parameters "))
                    .mapToDouble(l -> Double.parseDouble(l.replaceAll(".*; ([0-9.]+) MiB in all", "$1"))).max()
                    .orElseThrow();
            assertThat(most).as(name).isEqualTo(Math.round(pp.bytesPerDevice() / 1048576.0 * 10) / 10.0);
        }
    }

    @Test
    void aBf16RowsCommandTrains() {
        Planner.Result res = planner().plan(GptConfig.TINY, 8, 16, new Cluster(2, 1L << 30, 1e11, 1e14));
        Layout z1 = res.all().stream().filter(l -> l.strategy().equals("ZeRO-1+bf16")
                && l.recompute() == io.accel4j.train.model.Recompute.GELU).findFirst().orElseThrow();
        assertThat(z1.trainArgs()).containsSubsequence("--precision", "bf16", "--zero", "1");
        assertThat(z1.bytesPerDevice()).isLessThan(res.all().stream().filter(l -> l.strategy().equals("ZeRO-1")
                && l.recompute() == z1.recompute()).findFirst().orElseThrow().bytesPerDevice());
        Result t = train("  bin/accel4j train --ranks 2 --model tiny " + String.join(" ", z1.trainArgs()));
        assertThat(t.out()).contains("saved activations in bf16", String.format(Locale.ROOT,
                "(activations %.1f MiB, recompute gelu) per rank", z1.memory().activations() / 1048576.0));
    }

    @Test
    void jsonHasTheNewRowsAndTheirAssumptions() {
        Result r = run("plan", "--model", "tiny", "--device", "cpu", "--devices", "4", "--global-batch", "8", "--seq",
                "16", "--device-memory", "1g", "--model-parallel", "--bf16", "--json");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("{\"strategy\":\"TP2\",", "{\"strategy\":\"PP2+Z1\",", "\"TP2×PP2\"",
                "\"DDP+bf16\"", "\"tensorParallel\":2,\"pipelineStages\":2", "\"--schedule-pp\",\"1f1b\"",
                "\"--precision\",\"bf16\"", "\"assumptions\":\"TP/PP: ", "(M+P-1)/M", "+bf16: ");
        String j = r.out().strip();
        assertThat(j.chars().filter(ch -> ch == '{').count()).isEqualTo(j.chars().filter(ch -> ch == '}').count());
    }

    @Test
    void modelParallelOnCudaIsAUsageError() {
        Result r = run("plan", "--model", "tiny", "--devices", "2", "--global-batch", "8", "--device-memory", "1g",
                "--model-parallel");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("--model-parallel: train runs --tp and --pp on the CPU so far: use --device cpu")
                .doesNotContain("Exception");
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
