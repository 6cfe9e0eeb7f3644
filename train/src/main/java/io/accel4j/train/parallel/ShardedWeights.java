package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.Weights;
import java.lang.foreign.MemorySegment;

/**
 * GPT-2's ZeRO-2/3 {@link Weights}: {@link ShardedUnits} over {@link UnitLayout#of(ParameterLayout)}, each llm.c
 * tensor's layer slice named by its {@link UnitLayout.Place} (its unit, its place in the unit's packing and in the flat
 * vector). Everything else is the sharded units'.
 */
public final class ShardedWeights implements Weights {

    private final ShardedUnits units;
    /** Per tensor, per layer (one entry for wte, wpe, lnfw, lnfb). */
    private final UnitLayout.Place[][] places;

    /**
     * Rank {@code comm.rank()}'s weights at ZeRO stage 3 ({@code shardParameters}: its shard of {@code full}) or 2 (a
     * copy of {@code full}), in {@code ops}' memory; {@code full} is the whole parameter vector, the same on every
     * rank, in that memory too (the model's flat parameters).
     */
    public ShardedWeights(ParameterLayout layout, Communicator comm, Ops ops, MemorySegment full,
                          boolean shardParameters) {
        this.places = places(layout);
        this.units = new ShardedUnits(UnitLayout.of(layout), comm, ops, shardParameters);
        try {
            units.placeFromDevice(full);
        } catch (RuntimeException | Error e) {
            units.close();
            throw e;
        }
    }

    private static UnitLayout.Place[][] places(ParameterLayout layout) {
        int L = layout.config().L();
        UnitLayout.Place[][] out = new UnitLayout.Place[Param.values().length][];
        for (ParameterLayout.Unit u : layout.units()) {
            for (ParameterLayout.Segment s : u.segments()) {
                Param p = s.param();
                if (out[p.ordinal()] == null) {
                    out[p.ordinal()] = new UnitLayout.Place[s.layer() < 0 ? 1 : L];
                }
                out[p.ordinal()][Math.max(0, s.layer())] = new UnitLayout.Place(p.fileName(), u.index(), s.packed(),
                        s.offset(), s.count());
            }
        }
        return out;
    }

    /** The sharded units underneath. */
    public ShardedUnits units() {
        return units;
    }

    /**
     * Stage 2's scratch, elements: a layer's chunk over {@code ranks} when there is one layer (no other layer's
     * gradient buffer to borrow), else 0.
     */
    public static long scratchElements(ParameterLayout layout, int ranks) {
        return ShardedUnits.scratchElements(UnitLayout.of(layout), ranks);
    }

    /** Whether the parameters are sharded (stage 3) rather than whole (stage 2). */
    public boolean shardsParameters() {
        return units.shardsParameters();
    }

    @Override
    public MemorySegment wholeParams() {
        return units.wholeParams();
    }

    /** Stage 3: the parameters this rank owns ({@link UnitShards#shardLength()} fp32, AdamW updates them); else null. */
    public MemorySegment paramShard() {
        return units.paramShard();
    }

    /** This rank's shard of the averaged gradients, valid after {@link #finishGradients}. */
    public MemorySegment gradShard() {
        return units.gradShard();
    }

    void setParameters(MemorySegment full) {
        units.setParameters(full);
    }

    void parametersChanged() {
        units.parametersChanged();
    }

    /** Waits for the gradients' reduce-scatters: the gradient shard is then the step's averaged gradient. */
    public void finishGradients() {
        units.finishGradients();
    }

    void gatherParameters(MemorySegment full) {
        units.gatherParameters(full);
    }

    void gatherParameters(MemorySegment full, boolean onDevice) {
        units.gatherParameters(full, onDevice);
    }

    void gatherUpdated() {
        units.gatherUpdated();
    }

    @Override
    public MemorySegment param(Param p, int layer) {
        return units.param(place(p, layer));
    }

    @Override
    public MemorySegment grad(Param p, int layer) {
        return units.grad(place(p, layer));
    }

    private UnitLayout.Place place(Param p, int layer) {
        UnitLayout.Place[] ps = places[p.ordinal()];
        return ps[ps.length == 1 ? 0 : layer];
    }

    @Override
    public void acquire(int unit) {
        units.acquire(unit);
    }

    @Override
    public void prefetch(int unit) {
        units.prefetch(unit);
    }

    @Override
    public void release(int unit) {
        units.release(unit);
    }

    @Override
    public void zeroGrad() {
        units.zeroGrad();
    }

    @Override
    public void beginGradients(int unit) {
        units.beginGradients(unit);
    }

    @Override
    public void gradientsDone(int unit) {
        units.gradientsDone(unit);
    }

    long workingBytes() {
        return units.workingBytes();
    }

    @Override
    public long bytes() {
        return units.bytes();
    }

    @Override
    public void close() {
        units.close();
    }
}
