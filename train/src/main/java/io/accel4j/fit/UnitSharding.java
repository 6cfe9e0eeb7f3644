package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
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
 * ZeRO (Rajbhandari et al. 2020) sharded unit by unit ({@link ShardedUnits}): the averaged gradients and the optimizer
 * state are sharded over the ranks, rank r holding chunk r of every unit (a unit's tensors gathered together:
 * {@link UnitShards}), and at stage 3 the parameters too. The model's backward reduce-scatters ({@code AVG}) each
 * unit's gradients into the rank's shard as soon as the unit ends, overlapping the next unit's; {@link #reduce} waits
 * for them. A model is put on the units by its own adapter: a module tree through {@link ShardedModel}
 * ({@code Learner}'s ZeRO-3, and its ZeRO-2 of a model with unit scopes of its own: each child of its top-level
 * sequence a unit, or the model's own {@code UnitScope}s — GPT-2's {@code Gpt2Blocks.body}),
 * or a {@code train.model.Gpt2} through {@code ShardedWeights} (embeddings, each layer, the final LayerNorm: the
 * plan's trial step). The two GPT-2 adapters hold the same units.
 * <ul>
 *   <li><b>Stage 2</b> (the units' parameters whole, {@link ShardedUnits#wholeParams()}): the optimizer updates the
 *       rank's runs of the whole parameter vector from its gradient shard ({@link OptimizerSpec#createOverWhole}),
 *       and {@link #afterUpdate} all-gathers every rank's updated runs, unit by unit.</li>
 *   <li><b>Stage 3</b>: a unit's forward and backward all-gather its parameters into a working buffer just before
 *       use (the next one's gather started while this one computes); the optimizer updates the rank's parameter
 *       shard, and the next use of each unit gathers it again.</li>
 * </ul>
 *
 * <p>The numbers are DDP's: the optimizer updates each element of the rank's shard as the whole-vector optimizer
 * would (its runs of the flat vector name the elements, {@link OptimizerSpec.Run}), the gathers move bytes, and the
 * gradient norm is the ranks' float64 shard sums exchanged bit for bit and added in rank order (as
 * {@link ZeroSharding}'s stage 2). With 2 ranks and one micro-batch a step equals DDP's bit for bit without clipping
 * (a + b = b + a); with clipping the norm's grouping can move the clip factor by an ulp; with 3 or more ranks the
 * per-unit reduce-scatter adds an element's terms in another order than the whole-buffer all-reduce; with several
 * micro-batches the sum over micro-batches of the ranks' averages replaces the average of the ranks' sums (a
 * rounding).
 *
 * <p>Checkpoints stay whole: {@link #gatherShards} all-gathers a state vector into every rank's whole one,
 * {@link #gatherToRoot} brings it to rank 0 alone (host memory, no whole vector on the others), {@link #copyParameters}
 * gathers the parameters; a model without unit scopes of its own whose parameters are used outside their child (a
 * head tied to the embedding) cannot be split child by child by {@link ShardedModel} and is refused when its network
 * is built, naming the module and the tensor ({@code nn.Builder#own}); GPT-2's scopes put the tied head in the
 * embeddings' unit.
 */
public final class UnitSharding extends DataParallel {

    private final ShardedUnits units;
    private final DeviceMemory memory;
    /** The module tree whose units these are, freed on {@link #close}; null: the units' owner frees them. */
    private final ShardedModel model;

    /**
     * ZeRO-2 or 3 (as {@code units} shard the parameters or not) over {@code comm}, the units in {@code memory}, with
     * room for {@code values} floats in {@link #max} ({@link DataParallel#DataParallel(Communicator, DeviceMemory,
     * int)}). The units stay their owner's (GPT-2's model, whose weights they are).
     *
     * @throws IllegalArgumentException when {@code comm} has one rank
     */
    public UnitSharding(Communicator comm, DeviceMemory memory, ShardedUnits units, int values) {
        this(comm, memory, units, null, values);
    }

    /** ZeRO-3 over {@code model}'s units (its network built), which this strategy then owns. */
    UnitSharding(Communicator comm, DeviceMemory memory, ShardedModel model, int values) {
        this(comm, memory, model.units(), model, values);
    }

    private UnitSharding(Communicator comm, DeviceMemory memory, ShardedUnits units, ShardedModel model,
                         int values) {
        super(comm, memory, values);
        this.model = model;
        if (comm.size() < 2) {
            close();
            throw new IllegalArgumentException("ZeRO shards over the ranks: it needs more than one rank");
        }
        this.units = units;
        this.memory = memory;
    }

    /** The ZeRO stage: 3 when the parameters are sharded, else 2. */
    public int stage() {
        return units.shardsParameters() ? 3 : 2;
    }

    @Override
    public Shard shard(long count) {
        throw new UnsupportedOperationException("ZeRO-" + stage() + "'s shard over units is a chunk of every unit, "
                + "not one range: use optimizer, gatherShards and scatterShard");
    }

    /** This rank's shard as runs of the flat vector, at their places in the shard buffers. */
    public List<OptimizerSpec.Run> runs() {
        List<OptimizerSpec.Run> runs = new ArrayList<>();
        for (UnitShards.Piece p : units.shards().pieces()) {
            runs.add(new OptimizerSpec.Run(p.flat(), p.shard(), p.length()));
        }
        return List.copyOf(runs);
    }

    @Override
    public Optimizer optimizer(OptimizerSpec spec, Network net) {
        return optimizer(spec, net.ops(), net.table(), null, null);
    }

    /** The optimizer over this rank's shard of the units' buffers ({@code params} and {@code grads} are not used). */
    @Override
    public Optimizer optimizer(OptimizerSpec spec, Ops ops, io.accel4j.nn.ParameterTable table, MemorySegment params,
                               MemorySegment grads) {
        return units.shardsParameters()
                ? spec.create(ops, table, units.paramShard(), units.gradShard(), runs())
                : spec.createOverWhole(ops, table, units.wholeParams(), units.gradShard(), runs());
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

    /** Stage 2: every rank's updated runs into everyone's whole vector; stage 3: the gathered units are stale. */
    @Override
    public void afterUpdate(MemorySegment params, long count) {
        if (units.shardsParameters()) {
            units.parametersChanged(); // the next use of each unit gathers its updated shards
        } else {
            units.gatherUpdated();
        }
    }

    @Override
    public void gatherShards(MemorySegment shard, MemorySegment whole, long count, DeviceMemory memory) {
        units.gatherShardVector(shard, whole);
    }

    /**
     * Collective: rank 0 receives every rank's {@code shard} (a vector laid out as the rank's shard in the units'
     * memory, e.g. an optimizer's moment) into {@code full} (Ψ fp32, host memory) at its places of the flat layout;
     * the other ranks send theirs and pass null. Rank 0 receives each shard into a temporary of the largest one.
     */
    public void gatherToRoot(MemorySegment shard, MemorySegment full) {
        if (comm.rank() != 0) {
            long length = units.shards().shardLength();
            if (length > 0) {
                comm.send(shard, length, DType.FP32, 0);
            }
            return;
        }
        unpack(units.shards().pieces(), shard, full);
        UnitShards[] theirs = new UnitShards[comm.size()];
        long most = 0;
        for (int q = 1; q < comm.size(); q++) {
            theirs[q] = new UnitShards(units.layout(), comm.size(), q);
            most = Math.max(most, theirs[q].shardLength());
        }
        if (most == 0) {
            return;
        }
        try (DeviceArena tmp = memory.arena()) { // received where the communicator takes buffers
            MemorySegment buf = tmp.allocate(most * Float.BYTES);
            for (int q = 1; q < comm.size(); q++) {
                long len = theirs[q].shardLength();
                if (len > 0) {
                    comm.recv(buf, len, DType.FP32, q);
                    unpack(theirs[q].pieces(), buf, full);
                }
            }
        }
    }

    /** Copies a shard (the units' memory) laid out as {@code pieces} into its places of the flat host {@code full}. */
    private void unpack(List<UnitShards.Piece> pieces, MemorySegment shard, MemorySegment full) {
        for (UnitShards.Piece p : pieces) {
            long bytes = p.length() * Float.BYTES;
            memory.copyToHost(shard.asSlice(p.shard() * Float.BYTES, bytes), full.asSlice(p.flat() * Float.BYTES,
                    bytes));
        }
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

    /** Bytes of the units' buffers: the shards of the parameters (or the whole vector) and gradients, the working ones. */
    public long bytes() {
        return units.bytes();
    }

    /** Bytes of the working buffers for the units in use (and stage 2's scratch), within {@link #bytes()}. */
    public long workingBytes() {
        return units.workingBytes();
    }

    @Override
    public void close() {
        try {
            if (model != null) {
                model.close();
            }
        } finally {
            super.close();
        }
    }
}
