package io.accel4j.optim;

import io.accel4j.core.memory.DeviceMemory;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * An optimizer over a network's flat parameter buffer, owning its state (moments, momentum) in the backend's memory:
 * {@link #step} makes one update from the gradient buffer through the backend's fused kernels, one call per
 * learning-rate group. Made by an {@link OptimizerSpec} for one network; closing frees the state.
 */
public interface Optimizer extends AutoCloseable {

    /**
     * One update, the {@code t}-th (≥ 1; bias corrections count from it), at learning rate {@code lr} (times each
     * group's multiplier), every gradient multiplied by {@code gradScale} first (clipping and loss-scale unscaling
     * folded in).
     */
    void step(int t, float lr, float gradScale);

    /**
     * Whether {@link #stepPart} works: the update is element-wise and needs nothing after the last element (the fused
     * fp32 optimizers over packed parameters). False by default.
     */
    default boolean stepsInParts() {
        return false;
    }

    /**
     * The part of step {@code t} ({@link #step}'s arguments) that updates elements {@code [from, from + count)} of this
     * optimizer's range (counted from its start): stepping every element once, in any parts and any order, is the same
     * bits as {@link #step} (what an {@link Offload}ed optimizer's pipeline relies on).
     *
     * @throws UnsupportedOperationException unless {@link #stepsInParts()}
     * @throws IllegalArgumentException      for a part outside the range
     */
    default void stepPart(int t, float lr, float gradScale, long from, long count) {
        throw new UnsupportedOperationException(describe() + " does not step in parts");
    }

    /** Elements {@code [from, from + count)} of an optimizer's range. */
    record Part(long from, long count) {}

    /**
     * Asks {@link #step} to return before the parameters are on the backend, their upload overlapping what follows
     * (the next forward), in {@code order} (parts covering the range once each: a model's units, first used first).
     * Whoever then reads parameters waits first: a unit's forward for its parts ({@link #awaitParameters(long, long)}),
     * anything else for all of them ({@link #awaitParameters()}). Only an overlapped {@link Offload}ed optimizer
     * defers; the others return false and upload nothing.
     *
     * @return whether the steps defer their upload from now on
     */
    default boolean deferUpload(java.util.List<Part> order) {
        return false;
    }

    /**
     * Blocks until the backend's parameters {@code [from, from + count)} of this optimizer's range hold the last
     * step's result: a step of an {@link Offload}ed optimizer whose upload overlaps the next forward
     * ({@link #deferUpload}) may return before they do. At once by default.
     */
    default void awaitParameters(long from, long count) {}

    /** Blocks until every parameter of this optimizer's range holds the last step's result ({@link #awaitParameters}). */
    default void awaitParameters() {}

    /**
     * The state buffers by name, in a fixed order (e.g. {@code m}, {@code v}), each holding one fp32 value per
     * parameter in the backend's memory: what a checkpoint saves and a resume restores.
     */
    Map<String, MemorySegment> state();

    /**
     * The memory {@link #state()}'s segments belong to, through which a checkpoint reads and writes them: the
     * backend's ({@code ops.memory()}) for the fused optimizers, host memory for an {@link Offload}ed one.
     */
    DeviceMemory stateMemory();

    /**
     * The parameters were written from outside the optimizer (a resume, a loaded model): an optimizer that keeps
     * its own copy of them (an {@link Offload}ed one's master weights) takes it again before its next step. Nothing
     * by default.
     */
    default void parametersReplaced() {}

    /**
     * Bytes of host memory this optimizer allocated besides {@link #state()} (an {@link Offload}ed one's master copy
     * and gradient landing buffer); 0 by default.
     */
    default long hostScratchBytes() {
        return 0;
    }

    /** Bytes of {@link #state()}. */
    default long stateBytes() {
        return state().values().stream().mapToLong(MemorySegment::byteSize).sum();
    }

    /** A one-line description for logs: name and hyperparameters. */
    String describe();

    /** Frees the state. */
    @Override
    void close();
}
