package io.accel4j.fit;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.nn.Network;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A strategy that decorates another ({@code inner}): the rank, the parameters' and shards' transfers, the update's
 * follow-up and the small values' exchange are {@code inner}'s unless a subclass says otherwise. What a decorator
 * changes — the reduction, the norm, the overflow check, the optimizer's placement — it overrides; what it does not
 * forward here (the shard, the gradients' slice, the reduction) stays the interface's default or its own.
 */
abstract class ForwardingGradientSync implements GradientSync {

    /** The decorated strategy. */
    protected final GradientSync inner;

    ForwardingGradientSync(GradientSync inner) {
        this.inner = Objects.requireNonNull(inner, "inner");
    }

    @Override
    public int rank() {
        return inner.rank();
    }

    @Override
    public int ranks() {
        return inner.ranks();
    }

    @Override
    public void gatherShards(MemorySegment shard, MemorySegment whole, long count, DeviceMemory memory) {
        inner.gatherShards(shard, whole, count, memory);
    }

    @Override
    public void scatterShard(MemorySegment whole, MemorySegment shard, long count, DeviceMemory memory) {
        inner.scatterShard(whole, shard, count, memory);
    }

    @Override
    public void setParameters(Network net, MemorySegment host) {
        inner.setParameters(net, host);
    }

    @Override
    public void resumeParameters(Network net, MemorySegment host, int updates) {
        inner.resumeParameters(net, host, updates);
    }

    @Override
    public void copyParameters(Network net, MemorySegment host) {
        inner.copyParameters(net, host);
    }

    @Override
    public void afterUpdate(MemorySegment params, long count) {
        inner.afterUpdate(params, count);
    }

    @Override
    public double mean(double value) {
        return inner.mean(value);
    }

    @Override
    public boolean any(boolean local) {
        return inner.any(local);
    }

    @Override
    public float[] max(float[] values) {
        return inner.max(values);
    }

    @Override
    public String stepJson() {
        return inner.stepJson();
    }

    @Override
    public void close() {
        inner.close();
    }
}
