package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Module;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.nn.ParameterSource;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.UnitScope;
import io.accel4j.nn.Units;
import io.accel4j.train.parallel.ShardedUnits;
import io.accel4j.train.parallel.UnitLayout;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A module tree whose parameters live in ZeRO-3's shards ({@link ShardedUnits}) rather than in its network's flat
 * buffers: each child of its top-level {@link Sequential} is a unit ({@link UnitScope#perChild}), whose tensors (the
 * table entries the child declared) are gathered together before its forward and backward and whose gradients are
 * reduce-scattered after its backward. Children without parameters are no unit. The units form one chain: they
 * alternate between two working buffers, the next one gathered while the current one computes. Build the network
 * from {@link #scoped()} with {@link #parameters}; the sharded buffers are made when the network's table is known.
 */
final class ShardedModel implements AutoCloseable {

    private final Communicator comm;
    private final Ops ops;
    private final Sequential scoped;
    private final List<UnitScope> scopes = new ArrayList<>();
    private ShardedUnits units;
    private UnitLayout.Place[] places;
    /** Each scope's unit in the layout, or −1 for a child without parameters. */
    private int[] unitOf;

    /**
     * {@code body}'s children as units sharded over {@code comm}, in {@code ops}' memory.
     *
     * @throws IllegalArgumentException when {@code body} is not a {@link Sequential}
     */
    ShardedModel(Communicator comm, Ops ops, Module body) {
        if (!(body instanceof Sequential seq)) {
            throw new IllegalArgumentException("ZeRO-3 gathers the children of the model's top-level Sequential one "
                    + "at a time: make the model a Sequential (its " + body.getClass().getSimpleName() + " '"
                    + body.name() + "' is not)");
        }
        this.comm = comm;
        this.ops = ops;
        this.scoped = UnitScope.perChild(seq);
        for (Module m : scoped.children()) {
            scopes.add((UnitScope) m);
        }
    }

    /** The model with each child in its unit: the network is built from this. */
    Sequential scoped() {
        return scoped;
    }

    /** {@code spec} taking its parameters from this rank's shards. */
    NetworkSpec parameters(NetworkSpec spec) {
        return spec.parameters(this::bind, new Brackets());
    }

    /** The sharded buffers (once the network is built). */
    ShardedUnits units() {
        if (units == null) {
            throw new IllegalStateException("the network of this sharded model has not been built");
        }
        return units;
    }

    /** Called by the network's build once the table is known: the units, their layout and the sharded buffers. */
    private ParameterSource bind(ParameterTable table) {
        UnitLayout.Builder b = new UnitLayout.Builder(table.count());
        unitOf = new int[scopes.size()];
        Arrays.fill(unitOf, -1);
        places = new UnitLayout.Place[table.entries().size()];
        int next = 0;
        for (UnitScope s : scopes) {
            int[] range = s.declared();
            if (range[0] == range[1]) {
                continue; // no parameters: nothing to gather
            }
            List<long[]> runs = new ArrayList<>();
            long packed = 0;
            for (int i = range[0]; i < range[1]; i++) {
                ParameterTable.Entry e = table.entries().get(i);
                runs.add(new long[] {e.offset(), e.count()});
                places[i] = new UnitLayout.Place(e.name(), next, packed, e.offset(), e.count());
                packed += e.count();
            }
            b.add(UnitLayout.Kind.CHAINED, runs);
            unitOf[s.unit()] = next++;
        }
        this.units = new ShardedUnits(b.build(), comm, ops, true);
        return new ParameterSource() {
            @Override
            public MemorySegment param(int index) {
                return units.param(places[index]);
            }

            @Override
            public MemorySegment grad(int index) {
                return units.grad(places[index]);
            }
        };
    }

    /** The scopes' brackets passed to the sharded buffers, in the layout's unit numbers. */
    private final class Brackets implements Units {
        @Override
        public void acquire(int unit) {
            if (unitOf[unit] >= 0) {
                units.acquire(unitOf[unit]);
            }
        }

        @Override
        public void prefetch(int unit) {
            if (unitOf[unit] >= 0) {
                units.prefetch(unitOf[unit]);
            }
        }

        @Override
        public void release(int unit) {
            if (unitOf[unit] >= 0) {
                units.release(unitOf[unit]);
            }
        }

        @Override
        public void beginGradients(int unit) {
            if (unitOf[unit] >= 0) {
                units.beginGradients(unitOf[unit]);
            }
        }

        @Override
        public void gradientsDone(int unit) {
            if (unitOf[unit] >= 0) {
                units.gradientsDone(unitOf[unit]);
            }
        }

        @Override
        public void zeroGrad() {
            units.zeroGrad();
        }
    }

    @Override
    public void close() {
        if (units != null) {
            units.close();
        }
    }
}
