package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * A part of a network, in llm.c's spirit: an explicit forward and backward over flat fp32 buffers of {@code rows}
 * positions, computed through the kernel contract ({@link Pass#ops()}) only, with no autograd tape and no allocation
 * per step.
 *
 * <p><b>Life.</b> A module is built once, before anything is allocated: {@link #build} declares its parameters (named,
 * shaped, into the network's one flat parameter buffer and its twin gradient buffer) and the activations it keeps for
 * backward, through the {@link Builder}, and returns how many values per position it outputs for the given input
 * width, refusing a width it cannot take. The network then allocates exactly what was declared
 * ({@link ActivationPlan}, {@link ParameterTable}) and runs {@link #forward} and {@link #backward} with a {@link Pass}
 * that resolves the declared handles to memory for this call's B·T positions.
 *
 * <p><b>Buffers.</b> The caller owns {@code in} and {@code out} ({@code rows × width} values each) and keeps both
 * unchanged from the forward to the backward of the same pass. Backward <i>adds</i> into {@code din} and into the
 * parameter gradients (so micro-batches accumulate until the network zeroes the gradients), given {@code dout}, the
 * gradient of the loss with respect to {@code out}; {@code din} is null when the input takes no gradient (token ids).
 * A module whose {@link #gradientInPlace()} is true takes {@code din == dout}: on entry that buffer holds d(out), on
 * return d(in) — the residual stream's gradient, updated in place as llm.c does.
 */
public interface Module {

    /** This module's name among its siblings; parameters are named by the path of names from the root. */
    String name();

    /**
     * Declares parameters and activations for inputs of {@code inWidth} values per position and returns the output's
     * values per position.
     *
     * @throws ShapeException when this module cannot take {@code inWidth}
     */
    int build(Builder b, int inWidth);

    /** Writes {@code out (rows, outWidth)} from {@code in (rows, inWidth)}. */
    void forward(Pass p, MemorySegment in, MemorySegment out);

    /**
     * Adds the gradients of the loss with respect to this module's parameters and (unless null) to {@code in} into the
     * gradient buffer and {@code din}, given {@code dout}; {@code in} and {@code out} are the forward's.
     */
    void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din);

    /** Whether {@link #backward} takes {@code din == dout} (see the class comment); false by default. */
    default boolean gradientInPlace() {
        return false;
    }
}
