package io.accel4j.train.model;

import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;

/**
 * Where {@link Gpt2} finds its parameters and writes their gradients, unit by unit ({@link ParameterLayout#units()}:
 * the embeddings, each layer, the final LayerNorm). The model brackets every use of a unit's parameters by
 * {@link #acquire} and {@link #release}, names the unit it will acquire next ({@link #prefetch}), and brackets each
 * backward's writes of a unit's gradients by {@link #beginGradients} and {@link #gradientsDone}. {@link FlatWeights}
 * (the default) keeps everything in two flat buffers and ignores the brackets; a sharded implementation (ZeRO-3)
 * gathers a unit's parameters on {@code acquire} and reduce-scatters its gradients on {@code gradientsDone}, so every
 * call may be a collective: ranks sharing one must run their models in step.
 *
 * <p>A unit's slices ({@link #param}, {@link #grad}) are only valid between its {@code acquire} and {@code release}
 * (parameters) or {@code beginGradients} and {@code gradientsDone} (gradients). Not thread-safe.
 */
public interface Weights extends AutoCloseable {

    /** The whole parameter vector in the flat layout when these weights hold it, else null (ZeRO-3's shards). */
    MemorySegment wholeParams();

    /** Tensor {@code p}'s parameters for layer {@code layer} (ignored for wte, wpe, lnfw, lnfb), fp32. */
    MemorySegment param(Param p, int layer);

    /** Tensor {@code p}'s gradient for layer {@code layer}, laid out as {@link #param}. */
    MemorySegment grad(Param p, int layer);

    /** Unit {@code unit}'s parameters are about to be read. */
    void acquire(int unit);

    /** The model will acquire {@code unit} next: a hint to start fetching it. */
    void prefetch(int unit);

    /** Unit {@code unit}'s parameters are not read again until the next {@link #acquire}. */
    void release(int unit);

    /** A new accumulation of gradients starts (before the first micro-batch's backward). */
    void zeroGrad();

    /** This backward is about to add its first gradient into unit {@code unit}'s. */
    void beginGradients(int unit);

    /** This backward has finished unit {@code unit}'s gradients. */
    void gradientsDone(int unit);

    /** Bytes these weights allocated. */
    long bytes();

    /** Frees the memory; closing twice does nothing. */
    @Override
    void close();
}
