package io.accel4j.cli.plan;

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
import io.accel4j.train.plan.LayoutSource;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.StepTime;
import io.accel4j.train.precision.Precision;
import java.util.ArrayList;
import java.util.List;

/**
 * Tensor ({@code train --tp T}), pipeline ({@code --pp P --micro-batches M --schedule-pp 1f1b}) and tensor × pipeline
 * layouts of N devices: every T dividing N, NH, C, 4C and Vp, every P ≤ L with T·P dividing N (not both 1), the
 * D = N/(T·P) data-parallel replicas with ZeRO 0 or (D ≥ 2) 1, each keeping the largest micro-batch B that fits
 * (under 1F1B, M = G/(D·B) ≥ P). Memory: the trainer's own plans, {@link TensorParallelPlan} (P = 1, no recompute:
 * the tensor path takes none) and {@link StagePlan} (P ≥ 2, the largest stage on tensor rank 0, recompute none or
 * layer), each tested against what the Learner allocates. Time: {@link StepTime}'s FLOPs over the N devices,
 * stretched by the pipeline bubble {@code (M+P−1)/M}; the tensor group's all-reduces (2 per block forward and 2
 * backward of B·T·C fp32, ring: {@code 2(T−1)/T} of it sent) for each micro-batch over the largest stage's blocks;
 * the stage boundary's activation and gradient (B·T·C fp32 each way per micro-batch); the replicas' gradient
 * collectives over the rank's parameters ({@link StepTime#commBytes}) — all at the cluster's bandwidth, nothing
 * overlapped, recompute's repeated all-reduces not priced. With BF16 storage ({@code train --precision bf16}, rows
 * named {@code …+bf16}) the same layouts without recomputation (under {@code layer} recomputation wins and the
 * memory is fp32's), the saved activations in 16 bits in both plans, the fp32 FLOP rate kept.
 */
final class ModelParallelLayouts implements LayoutSource {

    private final DType storage;

    /** The fp32 layouts. */
    ModelParallelLayouts() {
        this(DType.FP32);
    }

    /** The layouts with the blocks' saved activations stored in {@code storage} (FP32 or BF16). */
    ModelParallelLayouts(DType storage) {
        if (storage != DType.FP32 && storage != DType.BF16) {
            throw new IllegalArgumentException("the planner's storage is fp32 or bf16, got " + storage);
        }
        this.storage = storage;
    }

    @Override
    public List<Layout> layouts(GptConfig model, int globalBatch, int T, Cluster cluster) {
        int n = cluster.devices();
        List<Layout> out = new ArrayList<>();
        for (int t = 1; t <= n; t++) {
            if (n % t != 0 || !splits(model, t)) {
                continue;
            }
            for (int p = 1; p <= Math.min(model.L(), n / t); p++) {
                int d = n / (t * p);
                if ((n / t) % p != 0 || t * p == 1 || globalBatch % d != 0) {
                    continue;
                }
                for (int zero = 0; zero <= (d >= 2 ? 1 : 0); zero++) {
                    for (Recompute r : recomputes(p)) {
                        Layout l = largestFitting(model, globalBatch / d, T, cluster, t, p, zero, r);
                        if (l != null) {
                            out.add(l);
                        }
                    }
                }
            }
        }
        return out;
    }

    /** none (and layer for a pipeline) in fp32; none in 16 bits, where layer recomputation stores nothing. */
    private List<Recompute> recomputes(int p) {
        return p == 1 || storage != DType.FP32 ? List.of(Recompute.NONE) : List.of(Recompute.NONE, Recompute.LAYER);
    }

    /** Whether {@code t} divides the heads, C, 4C and the padded vocabulary (what --tp checks). */
    static boolean splits(GptConfig model, int t) {
        return model.NH() % t == 0 && model.C() % t == 0 && (4L * model.C()) % t == 0 && model.Vp() % t == 0;
    }

    /** The largest B that fits, else the smallest B's layout; null when no B gives M ≥ P. */
    private Layout largestFitting(GptConfig model, int perReplica, int T, Cluster cluster, int t, int p, int zero,
                                  Recompute r) {
        Layout last = null;
        for (int b = perReplica; b >= 1; b--) {
            int k = perReplica / b;
            if (perReplica % b != 0 || (p > 1 && k < p)) {
                continue;
            }
            last = layout(model, T, cluster, t, p, zero, r, b, k);
            if (last.bytesPerDevice() <= cluster.memoryBytes()) {
                return last;
            }
        }
        return last;
    }

    Layout layout(GptConfig model, int T, Cluster cluster, int t, int p, int zero, Recompute r, int B, int K) {
        int n = cluster.devices(), d = n / (t * p);
        MemoryPlan mem = p == 1 ? tensorPlan(model, T, t, n, zero, B) : stagePlan(model, T, t, p, d, zero, r, B, K);
        double bubble = (K + p - 1.0) / K;
        double compute = StepTime.flops(model, T, (long) B * K * d, r) / (n * cluster.flops()) * bubble;
        double act = 4.0 * B * T * model.C(); // one micro-batch's B·T·C fp32
        int blocks = (model.L() + p - 1) / p;
        double tensorBytes = t == 1 ? 0 : K * blocks * 4 * act * 2.0 * (t - 1) / t;
        double pipeBytes = p == 1 ? 0 : 2 * K * act;
        double replicaBytes = StepTime.commBytes(mem.parameters() / Float.BYTES, d, zero, K);
        double comm = (tensorBytes + pipeBytes + replicaBytes) / cluster.bandwidth();
        List<String> args = new ArrayList<>();
        if (storage == DType.BF16) {
            args.addAll(List.of("--precision", "bf16"));
        }
        if (t > 1) {
            args.addAll(List.of("--tp", String.valueOf(t)));
        }
        if (p > 1) {
            args.addAll(List.of("--pp", String.valueOf(p), "--micro-batches", String.valueOf(K), "--schedule-pp",
                    "1f1b"));
        }
        if (zero > 0) {
            args.addAll(List.of("--zero", String.valueOf(zero)));
        }
        if (r != Recompute.NONE) {
            args.addAll(List.of("--recompute", r.toString()));
        }
        args.addAll(List.of("--batch", String.valueOf(B), "--seq", String.valueOf(T)));
        if (p == 1 && K > 1) {
            args.addAll(List.of("--grad-accum", String.valueOf(K)));
        }
        String name = (t > 1 ? "TP" + t : "") + (t > 1 && p > 1 ? "×" : "") + (p > 1 ? "PP" + p : "")
                + (zero > 0 ? "+Z1" : "") + (storage == DType.BF16 ? "+bf16" : "");
        return new Layout(name, d, t, p, zero, r, B, K, mem, new StepTime(compute, comm), List.copyOf(args));
    }

    /** {@link TensorParallelPlan}'s rank as a {@link MemoryPlan} (its activations hold the tokens too). */
    private MemoryPlan tensorPlan(GptConfig model, int T, int t, int n, int zero, int B) {
        TrainConfig cfg = TrainConfig.builder().precision(Precision.of(storage)).batch(B).seq(T).steps(1)
                .zeroStage(zero).build();
        TensorParallelPlan tp = TensorParallelPlan.of(model, cfg, t, n);
        return new MemoryPlan(tp.parameters(), tp.gradients(), tp.optimizerState(), 0, tp.activations(), 0);
    }

    /**
     * The largest stage's {@link StagePlan} as a {@link MemoryPlan}: the micro-batch slots alive under 1F1B as the
     * activations, a tied tensor's gradient scratch as working memory.
     */
    private MemoryPlan stagePlan(GptConfig model, int T, int t, int p, int d, int zero, Recompute r, int B,
                                 int M) {
        Gpt2Stages stages = t > 1 ? Gpt2Stages.parallel(model) : Gpt2Stages.of(model);
        Partition split = Partition.balanced(stages.parameters(), p);
        PipelineRank.Options o = new PipelineRank.Options(B, T, M, model.V(), model.V(), storage, r,
                new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0f, false), step -> 0f, 1f, 0L, storage);
        StagePlan most = null;
        for (int s = 0; s < p; s++) {
            StagePlan sp = StagePlan.of(stages, split, Schedule.ONE_F_ONE_B, o, s, t, 0, d, zero);
            if (most == null || sp.total() > most.total()) {
                most = sp;
            }
        }
        return new MemoryPlan(most.parameterBytes(), most.gradientBytes(), most.optimizerBytes(), most.tieBytes(),
                most.slotBytes() * most.slots() + most.workingBytes(), 0);
    }
}
