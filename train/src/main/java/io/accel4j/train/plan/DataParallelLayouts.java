package io.accel4j.train.plan;

import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.util.ArrayList;
import java.util.List;

/**
 * DDP and ZeRO 1–3 over all the devices, each with every {@link Recompute} mode ({@link #modes}): the global batch G is split into
 * {@code G/N} sequences per rank (N must divide G), made of K micro-batches of B = G/(N·K) for each divisor B, and
 * each (stage, recompute) keeps the largest B that fits the device (fewer, larger micro-batches run faster) — or, if
 * none fits, B = 1, so that the planner can say by how much it misses. Memory: {@link MemoryPlan#of} (the trainer's
 * allocation); time: {@link StepTime}.
 */
public final class DataParallelLayouts implements LayoutSource {

    private final DType storage;
    private final DType gradients;

    /** The fp32 layouts. */
    public DataParallelLayouts() {
        this(DType.FP32);
    }

    /**
     * The layouts with the activations the blocks save for backward stored in {@code storage}: BF16 is
     * {@code train --precision bf16} ({@link MemoryPlan#of(GptConfig, int, int, Recompute, int, int, DType)}); the
     * estimate keeps the fp32 FLOP rate (the 16-bit matmul operands' speed-up is not priced).
     */
    public DataParallelLayouts(DType storage) {
        this(storage, DType.FP32);
    }

    /**
     * {@link #DataParallelLayouts(DType)} with the gradients stored in {@code gradients}: BF16 is
     * {@code train --grad-storage bf16} ({@link MemoryPlan#of(GptConfig, int, int, Recompute, int, int, DType, DType)}),
     * which runs with one rank, DDP or ZeRO-1, so its layouts are stages 0 and 1.
     */
    public DataParallelLayouts(DType storage, DType gradients) {
        if (storage != DType.FP32 && storage != DType.BF16) {
            throw new IllegalArgumentException("the planner's storage is fp32 or bf16, got " + storage);
        }
        if (gradients != DType.FP32 && gradients != DType.BF16) {
            throw new IllegalArgumentException("the planner's gradient storage is fp32 or bf16, got " + gradients);
        }
        this.storage = storage;
        this.gradients = gradients;
    }

    @Override
    public List<Layout> layouts(GptConfig model, int globalBatch, int T, Cluster cluster) {
        int n = cluster.devices();
        int perRank = LayoutSource.perDevice(globalBatch, cluster);
        // ZeRO shards nothing on one device; 16-bit gradients go up to ZeRO-1 (ZeRO-2/3 hold fp32 gradient shards)
        int maxStage = n == 1 ? 0 : gradients != DType.FP32 ? 1 : 3;
        List<Layout> out = new ArrayList<>();
        for (int stage = 0; stage <= maxStage; stage++) {
            for (Recompute r : modes(model)) {
                int z = stage;
                out.add(LayoutSource.largestFitting(perRank, cluster, (b, k) -> layout(model, T, cluster, z, r, b, k)));
            }
        }
        return out;
    }

    /** NONE, GELU, LAYER and, from 3 layers, every:K with K = round(√L) (the fewest kept layer outputs). */
    public static List<Recompute> modes(GptConfig model) {
        List<Recompute> modes = new ArrayList<>(List.of(Recompute.values()));
        if (model.L() >= 3) {
            modes.add(Recompute.every(Math.max(2, (int) Math.round(Math.sqrt(model.L())))));
        }
        return modes;
    }

    private Layout layout(GptConfig model, int T, Cluster cluster, int stage, Recompute r, int B, int K) {
        int n = cluster.devices();
        MemoryPlan mem = MemoryPlan.of(model, B, T, r, stage, n, storage, gradients);
        double compute = StepTime.flops(model, T, (long) B * K * n, r) / (n * cluster.flops());
        double comm = StepTime.commBytes(model.parameterCount(), n, stage, K) / cluster.bandwidth();
        List<String> args = new ArrayList<>();
        if (storage == DType.BF16) {
            args.addAll(List.of("--precision", "bf16"));
        }
        if (gradients == DType.BF16) {
            args.addAll(List.of("--grad-storage", "bf16"));
        }
        if (stage > 0) {
            args.addAll(List.of("--zero", String.valueOf(stage)));
        }
        if (r != Recompute.NONE) {
            args.addAll(List.of("--recompute", r.toString()));
        }
        args.addAll(List.of("--batch", String.valueOf(B), "--seq", String.valueOf(T)));
        if (K > 1) {
            args.addAll(List.of("--grad-accum", String.valueOf(K)));
        }
        String name = stage == 0 ? "DDP" : "ZeRO-" + stage;
        if (n == 1) {
            name = "single";
        }
        if (storage == DType.BF16) {
            name += "+bf16";
        }
        if (gradients == DType.BF16) {
            name += "+bf16-grads";
        }
        return new Layout(name, n, 1, 1, stage, r, B, K, mem, new StepTime(compute, comm), List.copyOf(args));
    }
}
