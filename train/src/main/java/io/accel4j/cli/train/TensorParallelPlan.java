package io.accel4j.cli.train;

import io.accel4j.collectives.Chunks;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import java.io.PrintWriter;

/**
 * What one rank of a {@code --tp T} run holds, from the shapes alone (nothing allocated): its shards of the
 * parameters and their gradients, AdamW's two moments (over the replicas' ZeRO-1 shard), the activations of one
 * micro-batch (their saved activations in 16 bits under {@code --precision bf16|fp16}); beside what one unsplit rank
 * would hold. Printed at the start of the run; what the Learner then
 * allocates is the same ({@code TensorParallelPlanTest}).
 *
 * @param parameters      bytes of this rank's parameters (fp32)
 * @param gradients       bytes of their gradients
 * @param optimizerState  bytes of AdamW's m and v for this rank's (ZeRO-1) shard
 * @param activations     bytes of the network's activations, inputs and targets
 * @param unsplit         the same total for one rank holding the whole model (no ZeRO)
 */
public record TensorParallelPlan(int tp, int dp, long parameters, long gradients, long optimizerState,
                                 long activations, long unsplit) {

    /** The plan of GPT-2 {@code model} trained with {@code cfg} over {@code world} ranks, {@code tp} of them a group. */
    public static TensorParallelPlan of(GptConfig model, TrainConfig cfg, int tp, int world) {
        int dp = world / tp;
        NetworkSpec.Plan split = spec(model, cfg).plan(tp);
        NetworkSpec.Plan whole = spec(model, cfg).plan(1);
        long p = split.parameters();
        long shard = cfg.zeroStage() == 1 ? Chunks.length(p, dp, 0) : p;
        long unsplit = 4 * whole.parameters() * Float.BYTES + whole.activationBytes();
        return new TensorParallelPlan(tp, dp, p * Float.BYTES, p * Float.BYTES, 2 * shard * Float.BYTES,
                split.activationBytes(), unsplit);
    }

    /**
     * The tensor layouts of {@code world} ranks (every T that divides the ranks, NH, C, 4C and Vp, smallest first)
     * whose per-rank plan fits {@code budget} bytes: what a planner picks from (the first is the least communication).
     */
    public static java.util.List<TensorParallelPlan> fitting(GptConfig model, TrainConfig cfg, int world,
                                                              long budget) {
        java.util.List<TensorParallelPlan> out = new java.util.ArrayList<>();
        for (int t = 1; t <= world; t++) {
            if (world % t == 0 && model.NH() % t == 0 && model.C() % t == 0 && model.Vp() % t == 0
                    && (cfg.zeroStage() == 0 || world / t >= 2)) {
                TensorParallelPlan p = of(model, cfg, t, world);
                if (p.total() <= budget) {
                    out.add(p);
                }
            }
        }
        return out;
    }

    private static NetworkSpec spec(GptConfig model, TrainConfig cfg) {
        return Gpt2Blocks.parallelSpec(model, null).batch(cfg.batch(), cfg.seq())
                .activationStorage(cfg.precision().activationStorage());
    }

    /** Every byte of the rank. */
    public long total() {
        return parameters + gradients + optimizerState + activations;
    }

    /** One line: the parts per rank in MiB, and the ratio to one unsplit rank. */
    public void print(PrintWriter w) {
        w.printf("memory per rank (%d data-parallel × %d tensor): parameters %.1f MiB, gradients %.1f MiB, optimizer "
                        + "state %.1f MiB, activations %.1f MiB; %.1f MiB in all (one unsplit rank: %.1f MiB, %.2fx)%n",
                dp, tp, mib(parameters), mib(gradients), mib(optimizerState), mib(activations), mib(total()),
                mib(unsplit), (double) total() / unsplit);
        w.flush();
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }
}
