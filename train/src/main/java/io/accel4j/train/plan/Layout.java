package io.accel4j.train.plan;

import io.accel4j.train.model.Recompute;
import java.util.List;

/**
 * One way to run a training step on a {@link Cluster}: how the devices split the work, the micro-batch and
 * accumulation that make up the global batch, what each device then holds ({@link MemoryPlan}, the trainer's own
 * accounting) and the estimated step time ({@link StepTime}).
 *
 * @param strategy     a short name, e.g. {@code DDP}, {@code ZeRO-2}; the {@link LayoutSource} decides
 * @param dataParallel data-parallel ranks (all the devices for the sources today)
 * @param tensorParallel  devices a layer is split over (1 until a tensor-parallel source exists)
 * @param pipelineStages  pipeline stages (1 until a pipeline source exists)
 * @param zeroStage    ZeRO stage 0..3
 * @param recompute    activation checkpointing
 * @param microBatch   sequences per micro-batch per data-parallel rank, B
 * @param accumulation micro-batches per step, K; B·K·dataParallel = the global batch
 * @param memory       bytes per device, by kind
 * @param step         the step-time estimate
 * @param trainArgs    the {@code accel4j train} flags of this layout on each rank (not the model, data, device or
 *                     rank-count flags, which depend on how the ranks are launched)
 */
public record Layout(String strategy, int dataParallel, int tensorParallel, int pipelineStages, int zeroStage,
                     Recompute recompute, int microBatch, int accumulation, MemoryPlan memory, StepTime step,
                     List<String> trainArgs) {

    /** Bytes per device. */
    public long bytesPerDevice() {
        return memory.total();
    }
}
