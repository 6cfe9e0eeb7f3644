package io.accel4j.cli.train;

import io.accel4j.core.DType;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.Bf16ParamsPlan;
import io.accel4j.train.plan.OffloadPlan;
import java.io.PrintWriter;
import java.util.Locale;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train --bf16-params}: the working weights stored in bf16 ({@link io.accel4j.train.model.Bf16ParamWeights}),
 * the fp32 master weights in the optimizer ({@link io.accel4j.optim.Bf16StoreAdamW}, stochastic rounding); its checks
 * (what it needs and what it does not compose with yet), the model's parameter storage and the log's words for it.
 */
final class Bf16ParamsOptions {

    @Option(names = "--bf16-params", description = "Store the working weights in bf16 (2 bytes a parameter of the "
            + "blocks and the final LayerNorm, widened one layer at a time into fp32 for the kernels; the tied "
            + "embeddings as fp32 copies of bf16 values), written by AdamW from fp32 master weights with stochastic "
            + "rounding; the master, m and v are the optimizer's (12 bytes a parameter). Needs --precision bf16; "
            + "one rank or DDP; with --offload-optimizer the master and the moments live in host memory. The model "
            + "file a checkpoint writes is the fp32 master.")
    boolean enabled;

    /**
     * Refuses, with one line naming both flags, what --bf16-params needs or does not go with yet: --precision other
     * than bf16, ZeRO (its stages shard an fp32 parameter vector), --sync async, --pp, --tp, and an explicit
     * --bucket-mb ({@code bucketsAsked}: the gradients are averaged after backward).
     */
    void check(TrainConfig cfg, String precision, boolean async, boolean pipeline, boolean tensor,
               boolean bucketsAsked, Function<String, ? extends RuntimeException> usage) {
        if (!enabled) {
            return;
        }
        if (cfg.precision().operands() != DType.BF16 || cfg.precision().fp8() != null) {
            throw usage.apply("--bf16-params needs --precision bf16 (this run is " + precision + "): the working "
                    + "weights are bf16 values, which only bf16 matmuls take without a further rounding");
        }
        String other = cfg.zeroStage() > 0 ? "--zero " + cfg.zeroStage() : async ? "--sync async"
                : pipeline ? "--pp" : tensor ? "--tp" : bucketsAsked ? "--bucket-mb" : null;
        if (other != null) {
            throw usage.apply("--bf16-params does not go with " + other + " yet: drop one of them");
        }
    }

    /** With the flag and --offload-optimizer: one line for the log, each side's bytes per rank. */
    void print(TrainConfig cfg, GptConfig model, Recompute recompute, PrintWriter w) {
        OffloadPlan p = Bf16ParamsPlan.offloaded(model, cfg.batch(), cfg.seq(), recompute,
                cfg.precision().activationStorage(), cfg.precision().gradients());
        w.printf(Locale.ROOT, "optimizer offloaded to host memory: %.1f MiB on the device (bf16 parameters, "
                + "gradients, activations), %.1f MiB on the host (fp32 master, AdamW m, v, transfer chunks) per "
                + "rank%n", p.device().total() / 1048576.0, p.host() / 1048576.0);
    }

    /** How the model stores its working weights: BF16 with the flag, else FP32. */
    DType parameters() {
        return enabled ? DType.BF16 : DType.FP32;
    }

    /** The run log's words: ", working weights in bf16 (fp32 master in AdamW)" with the flag, else nothing. */
    String describe() {
        return enabled ? ", working weights in bf16 (fp32 master in AdamW, stochastic rounding)" : "";
    }
}
