package io.accel4j.cli.train;

import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.OffloadPlan;
import java.io.PrintWriter;
import java.util.Locale;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train --offload-optimizer}: AdamW's moments and an fp32 master copy of the weights in host memory, updated
 * by the Vector API kernels ({@link io.accel4j.optim.Offload}); the model's memory keeps the parameters, gradients and
 * activations. Its checks (what it does not compose with yet), its plan line and whether the step is pipelined.
 */
final class OffloadOptions {

    @Option(names = "--offload-optimizer", description = "Keep AdamW's state and fp32 master weights in host "
            + "memory and update them with the CPU kernels; each step copies the gradients down and the weights up. "
            + "Saves 8 bytes a parameter of device memory (--device cuda); the results are the same bits.")
    boolean enabled;

    @Option(names = "--offload-overlap", paramLabel = "on|off", description = "With --offload-optimizer: pipeline "
            + "each step over chunks, the gradients of the next chunk copied down and the weights of the last one up "
            + "while the host updates one (on, the default), or copy down, update and copy up one after the other "
            + "(off). The same bits either way.")
    String overlap;

    /**
     * Refuses, with one line naming both flags, the combinations not supported yet: ZeRO (the trainer's ZeRO updates
     * its shards itself), --sync async (the servers hold the state), --pp, --tp, --find-batch-size; and
     * --offload-overlap other than on|off, or without --offload-optimizer.
     */
    void check(TrainConfig cfg, boolean async, boolean pipeline, boolean tensor, boolean findBatchSize,
               Function<String, RuntimeException> usage) {
        if (overlap != null && !overlap.equals("on") && !overlap.equals("off")) {
            throw usage.apply("--offload-overlap takes on or off, got '" + overlap + "'");
        }
        if (!enabled) {
            if (overlap != null) {
                throw usage.apply("--offload-overlap " + overlap + " needs --offload-optimizer");
            }
            return;
        }
        String other = cfg.zeroStage() > 0 ? "--zero " + cfg.zeroStage() : async ? "--sync async"
                : pipeline ? "--pp" : tensor ? "--tp" : findBatchSize ? "--find-batch-size" : null;
        if (other != null) {
            throw usage.apply("--offload-optimizer does not go with " + other + " yet: drop one of them");
        }
    }

    /** With the option: one line for the log, each side's bytes per rank ({@link OffloadPlan}). */
    void print(TrainConfig cfg, GptConfig model, Recompute recompute, PrintWriter w) {
        if (enabled) {
            OffloadPlan p = OffloadPlan.of(model, cfg.batch(), cfg.seq(), recompute,
                    cfg.precision().activationStorage(), cfg.precision().gradients());
            w.printf(Locale.ROOT, "optimizer offloaded to host memory: %.1f MiB on the device (parameters, gradients, "
                    + "activations), %.1f MiB on the host (master, gradients, AdamW m, v) per rank%n",
                    p.device().total() / 1048576.0, p.host() / 1048576.0);
        }
    }

    /** Whether the offloaded step is pipelined over chunks (--offload-overlap on, the default). */
    boolean overlaps() {
        return !"off".equals(overlap);
    }
}
