package io.accel4j.train.model;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;

/**
 * The parameters and their gradients as two flat fp32 buffers laid out by {@link ParameterLayout}, in an arena of
 * their own in the backend's memory (host memory on the CPU, device memory on a GPU); the unit brackets of {@link Weights} do nothing ({@link #zeroGrad} zeroes the gradients, which backward
 * then adds into across micro-batches).
 */
public final class FlatWeights implements Weights {

    private final ParameterLayout layout;
    private final DeviceMemory memory;
    private final DeviceArena arena;
    private final MemorySegment params;
    private final MemorySegment grads;

    /** Zeroed buffers for {@code layout}'s parameters and gradients in {@code memory}. */
    public FlatWeights(ParameterLayout layout, DeviceMemory memory) {
        this.layout = layout;
        this.memory = memory;
        this.arena = memory.arena();
        try {
            this.params = arena.allocate(layout.fp32Bytes());
            this.grads = arena.allocate(layout.fp32Bytes());
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    /** The parameters: {@code layout.count()} fp32. */
    public MemorySegment params() {
        return params;
    }

    /** The gradients, laid out as {@link #params()}. */
    public MemorySegment grads() {
        return grads;
    }

    @Override
    public MemorySegment wholeParams() {
        return params;
    }

    @Override
    public MemorySegment param(Param p, int layer) {
        return slice(params, p, layer);
    }

    @Override
    public MemorySegment grad(Param p, int layer) {
        return slice(grads, p, layer);
    }

    private MemorySegment slice(MemorySegment buf, Param p, int layer) {
        return buf.asSlice(layout.offset(p, layer) * Float.BYTES, layout.count(p, layer) * Float.BYTES);
    }

    @Override
    public void acquire(int unit) { }

    @Override
    public void prefetch(int unit) { }

    @Override
    public void release(int unit) { }

    @Override
    public void zeroGrad() {
        memory.zero(grads);
    }

    @Override
    public void beginGradients(int unit) { }

    @Override
    public void gradientsDone(int unit) { }

    @Override
    public long bytes() {
        return params.byteSize() + grads.byteSize();
    }

    @Override
    public void close() {
        arena.close();
    }
}
