package io.accel4j.cli.plan;

import io.accel4j.core.DType;
import io.accel4j.train.plan.Bf16ParamsLayouts;
import io.accel4j.train.plan.DataParallelLayouts;
import io.accel4j.train.plan.LayoutSource;
import io.accel4j.train.plan.OffloadLayouts;
import io.accel4j.train.plan.Planner;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code plan}'s choice of strategy families beyond DDP and ZeRO 1–3: the optimizer offloaded ({@code --offload}),
 * tensor and pipeline parallelism ({@code --model-parallel}), 16-bit saved activations ({@code --bf16}) and 16-bit
 * gradients too ({@code --bf16-grads}: DDP and ZeRO-1); composed
 * into the {@link Planner}'s sources.
 */
final class PlanStrategies {

    @Option(names = "--offload", description = "Also plan the layouts with the optimizer offloaded to the host "
            + "(train --offload-optimizer: no AdamW state on the device; the copies priced at --bandwidth).")
    boolean offload;

    @Option(names = "--model-parallel", description = "Also plan tensor (train --tp T), pipeline (--pp P "
            + "--micro-batches M --schedule-pp 1f1b) and tp × pp layouts, with the largest stage's memory; train "
            + "runs them on the CPU, so with --device cpu.")
    boolean modelParallel;

    @Option(names = "--bf16", description = "Also plan DDP and ZeRO (and, with --model-parallel, the tensor and "
            + "pipeline layouts) with train --precision bf16: the activations saved for backward stored in 16 bits "
            + "(the FLOP rate kept at --tflops).")
    boolean bf16;

    @Option(names = "--bf16-grads", description = "Also plan DDP and ZeRO-1 (and, with --offload, the offloaded "
            + "layouts) with train --precision bf16 --grad-storage bf16: the saved activations and the blocks' "
            + "gradients stored in 16 bits (one rank, DDP, ZeRO-1 or offload only).")
    boolean bf16Grads;

    @Option(names = "--bf16-params", description = "Also plan one device or DDP with train --precision bf16 "
            + "--grad-storage bf16 --bf16-params (bf16 working weights, the fp32 master with the optimizer), and "
            + "with --offload the optimizer in host memory too (ZeRO-Offload's layout: the device holds bf16 weights "
            + "and gradients).")
    boolean bf16Params;

    /** Refuses --model-parallel with CUDA devices, where train does not run --tp and --pp yet. */
    void check(boolean cuda, Function<String, RuntimeException> usage) {
        if (modelParallel && cuda) {
            throw usage.apply("--model-parallel: train runs --tp and --pp on the CPU so far: use --device cpu");
        }
    }

    /** The planner over the families asked for. */
    Planner planner() {
        List<LayoutSource> sources = new ArrayList<>(List.of(new DataParallelLayouts()));
        if (bf16) {
            sources.add(new DataParallelLayouts(DType.BF16));
        }
        if (bf16Grads) {
            sources.add(new DataParallelLayouts(DType.BF16, DType.BF16));
        }
        if (offload) {
            sources.add(new OffloadLayouts());
        }
        if (offload && bf16Grads) {
            sources.add(new OffloadLayouts(DType.BF16, DType.BF16));
        }
        if (bf16Params) {
            sources.add(new Bf16ParamsLayouts(false));
        }
        if (bf16Params && offload) {
            sources.add(new Bf16ParamsLayouts(true));
        }
        if (modelParallel) {
            sources.add(new ModelParallelLayouts());
        }
        if (modelParallel && bf16) {
            sources.add(new ModelParallelLayouts(DType.BF16));
        }
        return new Planner(sources);
    }

    /** The footnote on what the estimate assumes for the families asked for, or "". */
    String assumptions() {
        StringBuilder sb = new StringBuilder();
        if (modelParallel) {
            sb.append("TP/PP: memory of the largest stage on tensor rank 0 (StagePlan, TensorParallelPlan); compute "
                    + "stretched by the 1F1B bubble (M+P-1)/M; the tensor group's ring all-reduces, 2 per block "
                    + "forward and 2 backward of B·T·C fp32 per micro-batch, the stage boundary's B·T·C fp32 each "
                    + "way per micro-batch and the replicas' gradient collectives at --bandwidth, not overlapped; "
                    + "recompute's repeated all-reduces not priced. ");
        }
        if (bf16) {
            sb.append("+bf16: train --precision bf16, the saved activations in 16 bits (" + (modelParallel
                    ? "TP/PP rows without recompute; " : "") + "the 16-bit matmuls' speed-up not priced). ");
        }
        if (bf16Grads) {
            sb.append("+bf16-grads: train --precision bf16 --grad-storage bf16, the blocks' gradients in 16 bits too; "
                    + "the casts not priced. ");
        }
        if (bf16Params) {
            sb.append("+bf16-params: bf16 working weights (embeddings fp32-wide), 16-bit gradients, the fp32 master "
                    + "and moments with the optimizer" + (offload ? " (+off: on the host; 4 bytes of fp32 gradients "
                    + "down and 2 of bf16 weights up a parameter at --bandwidth)" : "") + ". ");
        }
        return sb.toString().strip();
    }
}
