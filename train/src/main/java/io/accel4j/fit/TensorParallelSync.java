package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.train.parallel.ValueExchange;
import java.lang.foreign.MemorySegment;

/**
 * A data-parallel strategy ({@code inner}, over this rank's data-parallel group) composed with tensor parallelism:
 * each rank of a tensor group holds its shards of the split tensors and the replicated ones whole, so the global
 * gradient norm is {@code Σ_ranks (Σ_split ‖g‖² + Σ_replicated ‖g‖²/T)} — every split tensor counted once through its
 * shards, every replicated one once — and an overflow anywhere in the tensor group is an overflow everywhere.
 * Everything else (the gradient average over the replicas, ZeRO's shards, the loss's mean) is {@code inner}'s. Needs
 * the whole averaged gradient on every rank after {@link #reduce} (DDP, ZeRO-1).
 */
final class TensorParallelSync extends ForwardingGradientSync {

    private final Network net;
    private final ValueExchange tensor;
    private final int T;

    TensorParallelSync(GradientSync inner, Communicator tensorGroup, Network net, DeviceMemory memory) {
        super(inner);
        this.net = net;
        this.T = tensorGroup.size();
        this.tensor = new ValueExchange(tensorGroup, memory, 2 * T);
    }

    @Override
    public Shard shard(long count) {
        return inner.shard(count);
    }

    @Override
    public void reduce(MemorySegment grads, long count) {
        inner.reduce(grads, count);
    }

    @Override
    public MemorySegment gradients(MemorySegment grads, long count) {
        return inner.gradients(grads, count);
    }

    @Override
    public double sumOfSquares(Ops ops, MemorySegment grads, long count) {
        double mine = 0;
        for (ParameterTable.Entry e : net.table().entries()) {
            double s = ops.sumOfSquares(grads.asSlice(e.offset() * Float.BYTES, e.count() * Float.BYTES), e.count());
            mine += net.sharding(e.name()).replicated() ? s / T : s;
        }
        double sum = 0;
        for (double d : tensor.allGather(mine)) { // in rank order: the same on every rank of the group
            sum += d;
        }
        return sum;
    }

    @Override
    public boolean anyNonFinite(Ops ops, MemorySegment grads, long count) {
        return any(ops.hasNonFinite(grads, count));
    }

    @Override
    public io.accel4j.optim.Optimizer optimizer(io.accel4j.optim.OptimizerSpec spec, Network n) {
        return inner.optimizer(spec, n);
    }

    @Override
    public io.accel4j.optim.Optimizer optimizer(io.accel4j.optim.OptimizerSpec spec, Ops ops,
                                                io.accel4j.nn.ParameterTable table, MemorySegment params,
                                                MemorySegment grads) {
        return inner.optimizer(spec, ops, table, params, grads);
    }

    @Override
    public boolean any(boolean local) {
        return inner.any(tensor.any(local));
    }

    @Override
    public void close() {
        try {
            tensor.close();
        } finally {
            inner.close();
        }
    }
}
