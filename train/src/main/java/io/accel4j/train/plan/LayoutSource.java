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

    /** A layout of B sequences a micro-batch and K micro-batches a step. */
    @FunctionalInterface
    interface Sizing {
        Layout of(int B, int K);
    }

    /**
     * The sequences each device takes of {@code globalBatch}.
     *
     * @throws IllegalArgumentException when the cluster's devices do not divide the global batch
     */
    static int perDevice(int globalBatch, Cluster cluster) {
        int n = cluster.devices();
        if (globalBatch % n != 0) {
            throw new IllegalArgumentException("the global batch " + globalBatch + " is not a multiple of the "
                    + n + " devices");
        }
        return globalBatch / n;
    }

    /**
     * The layout of the largest micro-batch B dividing {@code perDevice} (K = perDevice / B) whose device side fits
     * the cluster's memory; when none fits, B = 1's (the smallest need), for the planner to report.
     */
    static Layout largestFitting(int perDevice, Cluster cluster, Sizing sizing) {
        Layout last = null;
        for (int b = perDevice; b >= 1; b--) {
            if (perDevice % b == 0) {
                last = sizing.of(b, perDevice / b);
                if (last.bytesPerDevice() <= cluster.memoryBytes()) {
                    return last;
                }
            }
        }
        return last;
    }
}
