package io.accel4j.cli.bench;

import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.GptConfig;
import java.io.PrintWriter;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j bench layouts}: whole training steps of GPT-2 through the Java API under several layouts of in-process
 * ranks with the same global batch, in one run: one rank, data parallelism (dp = N), tensor parallelism (tp = N) and,
 * for N = 4, dp = 2 × tp = 2 and two pipelines of 2 stages and 2 micro-batches (1F1B): pp = 2 × tp = 2 and
 * dp = 2 × pp = 2. Each row: median ms/step over the timed steps (after untimed warm-up steps),
 * tokens/s of the global batch, and the bytes one rank allocated (network and optimizer state).
 */
@Command(name = "layouts", sortOptions = false,
        description = {"Time training steps of a GPT-2 model under one rank, data parallelism and tensor parallelism "
                + "(in-process ranks, the same global batch; with --ranks 4 also dp × tp and pp × tp, dp × pp) "
                + "and print "
                + "ms/step, tokens/s and memory per rank."})
public final class LayoutBenchCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "tiny|bench|gpt2", defaultValue = "bench",
            description = "Model preset (default: ${DEFAULT-VALUE}).")
    String model;
    @Option(names = "--ranks", paramLabel = "N", defaultValue = "2", description = "Ranks of the split layouts: 2 or "
            + "4 (default: ${DEFAULT-VALUE}).")
    int ranks;
    @Option(names = "--batch", paramLabel = "B", defaultValue = "4", description = "Global sequences per step "
            + "(default: ${DEFAULT-VALUE}).")
    int batch;
    @Option(names = "--seq", paramLabel = "T", defaultValue = "64", description = "Tokens per sequence "
            + "(default: ${DEFAULT-VALUE}).")
    int seq;
    @Option(names = "--steps", paramLabel = "N", defaultValue = "5", description = "Timed steps "
            + "(default: ${DEFAULT-VALUE}).")
    int steps;
    @Option(names = "--warmup", paramLabel = "N", defaultValue = "1", description = "Untimed steps first "
            + "(default: ${DEFAULT-VALUE}).")
    int warmup;
    @Option(names = "--threads", paramLabel = "N", defaultValue = "2", description = "Kernel threads in all, shared "
            + "by the ranks (default: ${DEFAULT-VALUE}).")
    int threads;

    @Override
    public Integer call() {
        GptConfig c;
        try {
            c = GptConfig.preset(model);
        } catch (IllegalArgumentException e) {
            throw usage("--model: " + e.getMessage());
        }
        if (ranks != 2 && ranks != 4) {
            throw usage("--ranks must be 2 or 4, got " + ranks);
        }
        if (batch % ranks != 0 || steps < 1 || warmup < 0 || threads < 1 || seq < 1 || seq > c.maxT()) {
            throw usage("--batch must be a multiple of --ranks, --steps >= 1, --warmup >= 0, --threads >= 1 and "
                    + "--seq in [1, " + c.maxT() + "], got --batch " + batch + ", --ranks " + ranks + ", --steps "
                    + steps + ", --warmup " + warmup + ", --threads " + threads + ", --seq " + seq);
        }
        if (c.NH() % ranks != 0 || c.Vp() % ranks != 0) {
            throw usage("--ranks " + ranks + " must divide the model's heads NH = " + c.NH() + " and Vp = " + c.Vp());
        }
        PrintWriter w = spec.commandLine().getOut();
        w.printf("GPT-2 %s (L=%d, NH=%d, C=%d, Vp=%d), global batch %d x %d tokens, %d thread(s), %d timed step(s)%n",
                model, c.L(), c.NH(), c.C(), c.Vp(), batch, seq, threads, steps);
        w.printf("%-14s %10s %12s %16s%n", "layout", "ms/step", "tokens/s", "MiB per rank");
        List<int[]> layouts = new ArrayList<>(List.of(new int[] {1, 1}, new int[] {ranks, 1},
                new int[] {ranks, ranks}));
        if (ranks == 4) {
            layouts.add(new int[] {4, 2});
        }
        for (int[] l : layouts) {
            run(w, c, l[0], l[1]);
        }
        if (ranks == 4 && c.L() >= 2) { // pipelines of 2 stages, 2 micro-batches (1F1B) each step
            for (int tp : new int[] {1, 2}) {
                int dp = 4 / (2 * tp), micro = 2;
                String name = tp == 2 ? "pp 2 x tp 2" : "dp 2 x pp 2";
                try (Learner learner = base(c, tp, batch / (dp * micro)).ranks(4).tensorParallel(tp)
                        .pipeline(tp == 1 ? io.accel4j.pipeline.Gpt2Stages.of(c)
                                : io.accel4j.pipeline.Gpt2Stages.parallel(c), 2, micro,
                                io.accel4j.pipeline.Schedule.ONE_F_ONE_B).build()) {
                    long bytes = 0;
                    double med = time(learner);
                    for (io.accel4j.pipeline.PipelineRank r : learner.stages()) { // the largest rank's
                        long mine = 2 * r.network().parameterBytes()
                                + r.network().slotBytes() * r.network().slotsAllocated();
                        for (java.lang.foreign.MemorySegment m : r.optimizer().state().values()) {
                            mine += m.byteSize();
                        }
                        bytes = Math.max(bytes, mine);
                    }
                    row(w, name, med, bytes);
                }
            }
        }
        return 0;
    }

    private io.accel4j.fit.LearnerBuilder base(GptConfig c, int tp, int B) {
        return Learner.of(() -> tp == 1 ? Gpt2Blocks.body(c) : Gpt2Blocks.parallelBody(c))
                .tokens(c.V()).classes(c.V()).parameterOrder(Gpt2Blocks.LLMC_ORDER)
                .batch(B, seq).optimizer(AdamW.of(0f)).schedule(LrSchedule.constant(1e-4f))
                .threads(threads).data(random(c.V()));
    }

    /** The median ms of the timed steps after the warm-up ones. */
    private double time(Learner learner) {
        learner.fit(warmup, null);
        List<StepMetrics> m = learner.fit(steps, null);
        double[] ms = m.stream().mapToDouble(StepMetrics::stepMs).sorted().toArray();
        return ms[ms.length / 2];
    }

    private void row(PrintWriter w, String name, double med, long bytes) {
        w.printf("%-14s %10.1f %12.0f %16.1f%n", name, med, batch * seq / (med / 1e3), bytes / 1048576.0);
        w.flush();
    }

    /** A row of {@code n} ranks, {@code tp} of them a tensor group (the rest data-parallel). */
    private void run(PrintWriter w, GptConfig c, int n, int tp) {
        String name = n == 1 ? "1 rank" : tp == 1 ? "dp " + n : tp == n ? "tp " + n : "dp " + n / tp + " x tp " + tp;
        try (Learner learner = base(c, tp, batch * tp / n).ranks(n).tensorParallel(tp).build()) {
            double med = time(learner);
            row(w, name, med, learner.network().totalBytes() + learner.optimizerStateBytes());
        }
    }

    private static DataSource.Factory random(int V) {
        return (replica, replicas, B, T) -> {
            SplittableRandom r = new SplittableRandom(42 + replica);
            return (in, tg) -> {
                for (long i = 0; i < (long) B * T; i++) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
                    tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
                }
            };
        };
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
