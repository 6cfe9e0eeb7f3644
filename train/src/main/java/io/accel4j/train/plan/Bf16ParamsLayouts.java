package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.util.ArrayList;
import java.util.List;

/**
 * One device or DDP with bf16 working weights ({@code train --precision bf16 --grad-storage bf16 --bf16-params}),
 * and with {@code offload} the optimizer in host memory too ({@code --offload-optimizer}: ZeRO-Offload's layout): each
 * recompute mode with the largest micro-batch whose device side fits — {@link Bf16ParamsPlan#of} (bf16 parameters,
 * 16-bit gradients, fp32 master and moments, activations), or {@link Bf16ParamsPlan#offloaded}'s device (no optimizer
 * state). Time: {@link StepTime}'s compute and DDP's ring; offloaded, plus the copies (4Ψ bytes of fp32 gradient chunks
 * down, 2Ψ of bf16 weights up) at the cluster's bandwidth, the host's AdamW not priced.
 */
public final class Bf16ParamsLayouts implements LayoutSource {

    private final boolean offload;

    /** The layouts with the optimizer on the device, or with {@code offload} on the host. */
    public Bf16ParamsLayouts(boolean offload) {
        this.offload = offload;
    }

    @Override
    public List<Layout> layouts(GptConfig model, int globalBatch, int T, Cluster cluster) {
        int perRank = LayoutSource.perDevice(globalBatch, cluster);
        List<Layout> out = new ArrayList<>();
        for (Recompute r : DataParallelLayouts.modes(model)) {
            out.add(LayoutSource.largestFitting(perRank, cluster, (b, k) -> layout(model, T, cluster, r, b, k)));
        }
        return out;
    }

    private Layout layout(GptConfig model, int T, Cluster cluster, Recompute r, int B, int K) {
        int n = cluster.devices();
        MemoryPlan mem = offload ? Bf16ParamsPlan.offloaded(model, B, T, r, DType.BF16, DType.BF16).device()
                : Bf16ParamsPlan.of(model, B, T, r, DType.BF16, DType.BF16);
        double compute = StepTime.flops(model, T, (long) B * K * n, r) / (n * cluster.flops());
        double copies = offload ? 6.0 * model.parameterCount() : 0;
        double comm = (StepTime.commBytes(model.parameterCount(), n, 0, K) + copies) / cluster.bandwidth();
        List<String> args = new ArrayList<>(List.of("--precision", "bf16", "--grad-storage", "bf16",
                "--bf16-params"));
        if (offload) {
            args.add("--offload-optimizer");
        }
        if (r != Recompute.NONE) {
            args.addAll(List.of("--recompute", r.toString()));
        }
        args.addAll(List.of("--batch", String.valueOf(B), "--seq", String.valueOf(T)));
        if (K > 1) {
            args.addAll(List.of("--grad-accum", String.valueOf(K)));
        }
        String name = (n == 1 ? "single" : "DDP") + "+bf16-params" + (offload ? "+off" : "");
        return new Layout(name, n, 1, 1, 0, r, B, K, mem, new StepTime(compute, comm), List.copyOf(args));
    }
}
