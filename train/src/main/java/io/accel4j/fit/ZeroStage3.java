package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Network;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.parallel.ShardedUnits;
import io.accel4j.train.parallel.UnitShards;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * ZeRO stage 3 (Rajbhandari et al. 2020) for a module tree of one's own: the parameters, the averaged gradients and
 * the optimizer state are all sharded over the ranks, with the GPT-2 trainer's machinery ({@link ShardedUnits}). Each
 * child of the model's top-level sequence becomes a unit ({@link ShardedModel}): its forward and
 * backward all-gather its parameters into one of two working buffers just before use (the next child's gather started
 * while this one computes), and its backward reduce-scatters ({@code AVG}) its gradients into the rank's shard as
 * soon as it ends. A rank holds its shards of everything plus four working buffers (two units' parameters, two
 * units' gradients), so the whole model is never in one place; the network itself allocates only its activations.
 *
 * <p>The numbers are DDP's: the optimizer updates each element of the rank's shard as the whole-vector optimizer
 * would (its runs of the flat vector name the elements, {@link OptimizerSpec.Run}), the gathers move bytes, and the
 * gradient norm is the ranks' float64 shard sums exchanged bit for bit and added in rank order (as
 * {@link ZeroSharding}'s stage 2). With 2 ranks and one micro-batch a step equals DDP's bit for bit without clipping
 * (a + b = b + a); with clipping the norm's grouping can move the clip factor by an ulp; with several micro-batches
 * the sum over micro-batches of the ranks' averages replaces the average of the ranks' sums (a rounding).
 *
 * <p>Checkpoints stay whole ({@link #gatherShards}, {@link #copyParameters}); a model whose parameters are used
 * outside their child (a head tied to the embedding) cannot be split this way and is refused when its network is
 * built, naming the module and the tensor ({@code nn.Builder#own}).
 */
final class ZeroStage3 extends DataParallel {

    private final ShardedModel model;
    private final ShardedUnits units;

    /**
     * ZeRO-3 over {@code comm} for the network built from {@code model} (which this strategy then owns), with room
     * for {@code values} floats in {@link #max} ({@link DataParallel#DataParallel(Communicator, DeviceMemory, int)}).
     *
     * @throws IllegalArgumentException when {@code comm} has one rank
     */
    ZeroStage3(Communicator comm, DeviceMemory memory, ShardedModel model, int values) {
        super(comm, memory, values);
        this.model = model;
        if (comm.size() < 2) {
            close();
            throw new IllegalArgumentException("ZeRO shards over the ranks: it needs more than one rank");
        }
        this.units = model.units();
    }

    @Override
    public Shard shard(long count) {
        throw new UnsupportedOperationException("ZeRO-3's shard is a chunk of every unit, not one range: use "
                + "optimizer, gatherShards and scatterShard");
    }

    @Override
    public Optimizer optimizer(OptimizerSpec spec, Network net) {
        List<OptimizerSpec.Run> runs = new ArrayList<>();
        for (UnitShards.Piece p : units.shards().pieces()) {
            runs.add(new OptimizerSpec.Run(p.flat(), p.shard(), p.length()));
        }
        return spec.create(net.ops(), net.table(), units.paramShard(), units.gradShard(), runs);
    }

    @Override
    public void reduce(MemorySegment grads, long count) {
        units.finishGradients();
    }

    @Override
    public MemorySegment gradients(MemorySegment grads, long count) {
        return units.gradShard();
    }

    @Override
    public double sumOfSquares(Ops o, MemorySegment grads, long count) {
        double mine = o.sumOfSquares(units.gradShard(), units.shards().shardLength());
        double sum = 0;
        for (double d : values.allGather(mine)) { // bit for bit, summed in rank order: the same on every rank
            sum += d;
        }
        return sum;
    }

    @Override
    public boolean anyNonFinite(Ops o, MemorySegment grads, long count) {
        return any(o.hasNonFinite(units.gradShard(), units.shards().shardLength()));
    }

    @Override
    public void afterUpdate(MemorySegment params, long count) {
        units.parametersChanged(); // the next use of each unit gathers its updated shards
    }

    @Override
    public void gatherShards(MemorySegment shard, MemorySegment whole, long count, DeviceMemory memory) {
        units.gatherShardVector(shard, whole);
    }

    @Override
    public void scatterShard(MemorySegment whole, MemorySegment shard, long count, DeviceMemory memory) {
        units.takeShard(whole, shard);
    }

    @Override
    public void setParameters(Network net, MemorySegment host) {
        units.setParameters(host);
    }

    @Override
    public void copyParameters(Network net, MemorySegment host) {
        units.gatherParameters(host);
    }

    /** Bytes this strategy allocated: the shards of the parameters and gradients, and the working buffers. */
    long bytes() {
        return units.bytes();
    }

    @Override
    public void close() {
        try {
            model.close();
        } finally {
            super.close();
        }
    }
}
