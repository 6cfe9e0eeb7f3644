package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.util.ArrayList;
import java.util.List;

/**
 * DDP (or one device) with the optimizer offloaded to the host ({@code --offload-optimizer}): each recompute mode
 * with the largest micro-batch whose device side ({@link OffloadPlan#device()}: parameters, gradients, activations,
 * no optimizer state) fits. Time: {@link StepTime}'s compute and DDP's ring, plus the offload's copies (4Ψ bytes of
 * gradients down and 4Ψ of parameters up, priced at the cluster's bandwidth: the host link is assumed no faster
 * than the collectives'); the host's AdamW is not priced. ZeRO with offload is not a layout the trainer runs yet.
 * {@link #OffloadLayouts(DType, DType)} plans them with 16-bit activations and gradients on the device
 * ({@code --precision bf16 --grad-storage bf16}: the gradients widened on their way down, so the copies are the same).
 */
public final class OffloadLayouts implements LayoutSource {

    private final DType storage;
    private final DType gradients;

    /** The fp32 layouts. */
    public OffloadLayouts() {
        this(DType.FP32, DType.FP32);
    }

    /**
     * The layouts with the saved activations in {@code storage} and the device's gradients in {@code gradients}
     * (each FP32 or BF16; BF16 gradients with BF16 activations, as {@code train --precision bf16 --grad-storage bf16}).
     */
    public OffloadLayouts(DType storage, DType gradients) {
        if (storage != DType.FP32 && storage != DType.BF16 || gradients != DType.FP32 && gradients != DType.BF16) {
            throw new IllegalArgumentException("the planner's storage and gradient storage are fp32 or bf16, got "
                    + storage + " and " + gradients);
        }
        this.storage = storage;
        this.gradients = gradients;
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
        MemoryPlan mem = OffloadPlan.of(model, B, T, r, storage, gradients).device();
        double compute = StepTime.flops(model, T, (long) B * K * n, r) / (n * cluster.flops());
        double copies = 8.0 * model.parameterCount();
        double comm = (StepTime.commBytes(model.parameterCount(), n, 0, K) + copies) / cluster.bandwidth();
        List<String> args = new ArrayList<>(List.of("--offload-optimizer"));
        if (storage == DType.BF16) {
            args.addAll(List.of("--precision", "bf16"));
        }
        if (gradients == DType.BF16) {
            args.addAll(List.of("--grad-storage", "bf16"));
        }
        if (r != Recompute.NONE) {
            args.addAll(List.of("--recompute", r.toString()));
        }
        args.addAll(List.of("--batch", String.valueOf(B), "--seq", String.valueOf(T)));
        if (K > 1) {
            args.addAll(List.of("--grad-accum", String.valueOf(K)));
        }
        String name = (n == 1 ? "offload" : "DDP+off") + (storage == DType.BF16 ? "+bf16" : "")
                + (gradients == DType.BF16 ? "+bf16-grads" : "");
        return new Layout(name, n, 1, 1, 0, r, B, K, mem, new StepTime(compute, comm), List.copyOf(args));
    }
}
