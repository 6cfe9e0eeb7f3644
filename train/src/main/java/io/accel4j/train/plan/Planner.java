package io.accel4j.train.plan;

import io.accel4j.train.model.GptConfig;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * {@code accel4j plan}'s logic: every layout of every {@link LayoutSource}, those that fit a device ranked by the
 * estimated step time (then by fewer accumulation steps, which the estimate does not price but a real device runs
 * faster, then by less recomputation — GELU's is not priced either —, then by memory), and, when none fits, the smallest need.
 */
public final class Planner {

    private final List<LayoutSource> sources;

    /** A planner over {@code sources}; {@link #standard()} for the strategies this engine runs. */
    public Planner(List<LayoutSource> sources) {
        this.sources = List.copyOf(sources);
    }

    /**
     * DDP and ZeRO 1–3 with every recompute mode (the CLI composes the bf16, offload, tensor and pipeline sources in
     * cli.plan.PlanStrategies).
     */
    public static Planner standard() {
        return new Planner(List.of(new DataParallelLayouts()));
    }

    /** {@link #standard()}'s layouts and those with the optimizer offloaded to the host ({@link OffloadLayouts}). */
    public static Planner withOffload() {
        return new Planner(List.of(new DataParallelLayouts(), new OffloadLayouts()));
    }

    /**
     * The outcome.
     *
     * @param all      every layout considered, in the sources' order
     * @param feasible those that fit, fastest first
     * @param smallest the layout that needs the least memory per device
     */
    public record Result(List<Layout> all, List<Layout> feasible, Layout smallest) {
        /** The best feasible layout, or null. */
        public Layout best() {
            return feasible.isEmpty() ? null : feasible.get(0);
        }
    }

    /** Plans {@code model} at {@code globalBatch} sequences of {@code T} tokens on {@code cluster}. */
    public Result plan(GptConfig model, int globalBatch, int T, Cluster cluster) {
        if (T < 1 || T > model.maxT()) {
            throw new IllegalArgumentException("the sequence length must be in [1, " + model.maxT()
                    + "] (the model's max_seq_len), got " + T);
        }
        if (globalBatch < 1) {
            throw new IllegalArgumentException("the global batch must be >= 1, got " + globalBatch);
        }
        List<Layout> all = new ArrayList<>();
        for (LayoutSource s : sources) {
            all.addAll(s.layouts(model, globalBatch, T, cluster));
        }
        List<Layout> feasible = all.stream().filter(l -> l.bytesPerDevice() <= cluster.memoryBytes())
                .sorted(Comparator.comparingDouble((Layout l) -> l.step().seconds())
                        .thenComparingInt(Layout::accumulation).thenComparing(Layout::recompute)
                        .thenComparingLong(Layout::bytesPerDevice))
                .toList();
        Layout smallest = all.stream().min(Comparator.comparingLong(Layout::bytesPerDevice)).orElseThrow();
        return new Result(List.copyOf(all), feasible, smallest);
    }
}
