package io.accel4j.train.plan;

import io.accel4j.train.model.GptConfig;
import java.util.List;

/**
 * The layouts of one family of parallel strategies for a model, a global batch and a cluster, fitting or not (the
 * {@link Planner} filters and ranks them). {@link DataParallelLayouts} is DDP and ZeRO 1–3; tensor and pipeline
 * parallelism plug in as further sources with their own memory accounting and step-time estimate.
 */
public interface LayoutSource {

    /**
     * Every layout of this family.
     *
     * @param globalBatch sequences per optimizer step over all devices
     * @param T           tokens per sequence
     */
    List<Layout> layouts(GptConfig model, int globalBatch, int T, Cluster cluster);
}
