package io.accel4j.pipeline;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.nn.StageNetwork;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Data parallelism around a pipeline stage: the D replicas of the stage (its data-parallel group, rank = replica)
 * average their gradients and losses every step, and under ZeRO-1 each updates chunk r of the stage's flat parameters
 * ({@link Chunks}'s split) with an optimizer holding that chunk's state only, then an all-gather hands every
 * replica the others' — DDP's bits with a D-th of the optimizer state (AdamW's result does not depend on the cut). Checkpoints see
 * the state whole ({@link #wholeState}); the communicator stays the caller's.
 */
final class StageReplicas implements AutoCloseable {

    private final Communicator group;
    private final StageValues values;
    /** This replica's chunk {offset, length} under ZeRO-1, or null: the optimizer has the whole stage. */
    private final long[] chunk;

    /** The replicas of {@code group} (2 or more) under ZeRO stage {@code zero} (0 or 1). */
    StageReplicas(Communicator group, int zero, long count) {
        if (zero < 0 || zero > 1) {
            throw new IllegalArgumentException("a pipeline's replicas take ZeRO stage 0 or 1, got " + zero);
        }
        this.group = group;
        this.chunk = zero == 1 ? new long[] {Chunks.start(count, group.size(), group.rank()),
                Chunks.length(count, group.size(), group.rank())} : null;
        this.values = new StageValues(group, 1);
    }

    /** Under ZeRO-1, an optimizer of this replica's chunk of {@code net} (the caller closes the whole one); or null. */
    Optimizer shardedOptimizer(OptimizerSpec spec, StageNetwork net) {
        if (chunk == null) {
            return null;
        }
        return spec.create(net.ops(), net.table(), slice(net.params()), slice(net.grads()), chunk[0], chunk[1]);
    }

    /** The replicas' mean of the gradients (in place) and of the loss sums, in replica order (the same bits each). */
    double average(MemorySegment grads, long count, double lossSum) {
        group.allReduce(grads, count, DType.FP32, ReduceOp.AVG);
        double sum = 0;
        for (double[] v : values.gather(lossSum)) {
            sum += v[0];
        }
        return sum / group.size();
    }

    /** After an update: under ZeRO-1, every replica's chunk of {@code params} to every replica (in place). */
    void afterUpdate(MemorySegment params, long count) {
        if (chunk != null) {
            group.allGather(slice(params), params, count, DType.FP32);
        }
    }

    /**
     * The optimizer's state by name as whole vectors of {@code count} fp32: under ZeRO-1 {@code scratch}'s, filled
     * by an all-gather of the chunks when {@code gather} (a collective of the replicas), else left for a checkpoint
     * to fill; without ZeRO the optimizer's own buffers.
     */
    Map<String, MemorySegment> wholeState(Optimizer optimizer, StageNetwork net, DeviceArena scratch, boolean gather) {
        Map<String, MemorySegment> m = new LinkedHashMap<>();
        long count = net.table().count();
        for (Map.Entry<String, MemorySegment> e : optimizer.state().entrySet()) {
            if (chunk == null) {
                m.put(e.getKey(), e.getValue());
                continue;
            }
            MemorySegment whole = scratch.allocate(count * Float.BYTES);
            if (gather) {
                net.memory().copy(e.getValue().asSlice(0, chunk[1] * Float.BYTES), slice(whole));
                group.allGather(slice(whole), whole, count, DType.FP32); // in place: this chunk is already there
            }
            m.put(e.getKey(), whole);
        }
        return m;
    }

    /** Under ZeRO-1, this replica's chunk of each whole vector of {@code filled} into the optimizer's state. */
    void takeState(Optimizer optimizer, StageNetwork net, Map<String, MemorySegment> filled) {
        if (chunk == null) {
            return;
        }
        for (Map.Entry<String, MemorySegment> e : optimizer.state().entrySet()) {
            net.memory().copy(slice(filled.get(e.getKey())), e.getValue().asSlice(0, chunk[1] * Float.BYTES));
        }
    }

    private MemorySegment slice(MemorySegment whole) {
        return whole.asSlice(chunk[0] * Float.BYTES, chunk[1] * Float.BYTES);
    }

    @Override
    public void close() {
        values.close();
    }
}
