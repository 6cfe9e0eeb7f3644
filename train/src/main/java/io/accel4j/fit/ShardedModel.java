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
 * A module tree whose parameters live in ZeRO-2/3's sharded units ({@link ShardedUnits}) rather than in its network's
 * flat buffers: the tensors of a unit (the table entries its {@link UnitScope}s declared, packed in the order of
 * their flat offsets) are gathered together before its forward and backward (stage 3; stage 2 keeps them whole) and
 * their gradients are reduce-scattered after its backward. Where the units come from:
 * <ul>
 *   <li>the model's own unit scopes when it has any ({@link #ownScopes}: GPT-2's {@code Gpt2Blocks.body}, a unit per
 *       block, the embeddings opened by the tied head and closed by the embedding, the final LayerNorm). A unit used
 *       by more than one scope, or whose scope is a child of the top-level sequence, has a working buffer of its own
 *       ({@link UnitLayout.Kind#OWN}: its gradients accumulate there over a step's micro-batches); the units whose
 *       scopes sit in a nested stack form the chain. For GPT-2 these are {@code UnitLayout.of(ParameterLayout)}'s units
 *       exactly (embeddings and final LayerNorm own, the blocks chained), as {@code ShardedWeights} shards a
 *       {@code train.model.Gpt2} (the plan's trial step);</li>
 *   <li>else each child of its top-level {@link Sequential} ({@link UnitScope#perChild}), all chained: they
 *       alternate between two working buffers, the next one gathered while the current one computes. Children
 *       without parameters are no unit.</li>
 * </ul>
 * Build the network from {@link #scoped()} with {@link #parameters}; the sharded buffers are made when the network's
 * table is known.
 */
final class ShardedModel implements AutoCloseable {

    private final Communicator comm;
    private final Ops ops;
    private final boolean shardParameters;
    private final Sequential scoped;
    /** The scopes in forward order, and whether each is a child of the top-level sequence. */
    private final List<UnitScope> scopes = new ArrayList<>();
    private final List<Boolean> topLevel = new ArrayList<>();
    /** Whether the units are the model's own scopes (else one per child, all chained). */
    private final boolean own;
    private ShardedUnits units;
    private UnitLayout.Place[] places;
    /** Each scope unit number's unit in the layout, or −1 for a unit without parameters. */
    private int[] unitOf;

    /**
     * {@code body}'s units ({@link #ownScopes} or its children) sharded over {@code comm}, in {@code ops}' memory; the
     * parameters sharded too when {@code shardParameters} (ZeRO-3), else whole on every rank (ZeRO-2).
     *
     * @throws IllegalArgumentException when {@code body} is not a {@link Sequential}
     */
    ShardedModel(Communicator comm, Ops ops, Module body, boolean shardParameters) {
        if (!(body instanceof Sequential seq)) {
            throw new IllegalArgumentException("ZeRO-" + (shardParameters ? 3 : 2) + " gathers the children of the "
                    + "model's top-level Sequential one at a time: make the model a Sequential (its "
                    + body.getClass().getSimpleName() + " '" + body.name() + "' is not)");
        }
        this.comm = comm;
        this.ops = ops;
        this.shardParameters = shardParameters;
        this.own = ownScopes(seq);
        this.scoped = own ? seq : UnitScope.perChild(seq);
        for (Module m : scoped.children()) {
            collect(m, true);
        }
    }

    /** Whether {@code body} brackets its own units ({@link UnitScope}s anywhere in its tree of sequences). */
    static boolean ownScopes(Module body) {
        if (body instanceof UnitScope) {
            return true;
        }
        if (body instanceof Sequential s) {
            for (Module c : s.children()) {
                if (ownScopes(c)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The scopes under {@code m} in forward order, {@code top} whether {@code m} is a child of the top level. */
    private void collect(Module m, boolean top) {
        if (m instanceof UnitScope u) {
            scopes.add(u);
            topLevel.add(top);
        } else if (m instanceof Sequential s) {
            for (Module c : s.children()) {
                collect(c, false);
            }
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
        int numbers = 0;
        for (UnitScope s : scopes) {
            numbers = Math.max(numbers, s.unit() + 1);
        }
        List<List<Integer>> tensors = new ArrayList<>(numbers); // per unit number, its table indices
        int[] uses = new int[numbers];
        boolean[] anyTop = new boolean[numbers];
        for (int n = 0; n < numbers; n++) {
            tensors.add(new ArrayList<>());
        }
        for (int k = 0; k < scopes.size(); k++) {
            UnitScope s = scopes.get(k);
            uses[s.unit()]++;
            anyTop[s.unit()] |= topLevel.get(k);
            int[] range = s.declared();
            for (int i = range[0]; i < range[1]; i++) {
                tensors.get(s.unit()).add(i);
            }
        }
        UnitLayout.Builder b = new UnitLayout.Builder(table.count());
        unitOf = new int[numbers];
        Arrays.fill(unitOf, -1);
        places = new UnitLayout.Place[table.entries().size()];
        int next = 0;
        for (int n = 0; n < numbers; n++) {
            List<Integer> mine = tensors.get(n);
            if (mine.isEmpty()) {
                continue; // no parameters: nothing to gather
            }
            mine.sort(java.util.Comparator.comparingLong(i -> table.entries().get(i).offset())); // flat order
            List<long[]> runs = new ArrayList<>();
            long packed = 0;
            for (int i : mine) {
                ParameterTable.Entry e = table.entries().get(i);
                runs.add(new long[] {e.offset(), e.count()});
                places[i] = new UnitLayout.Place(e.name(), next, packed, e.offset(), e.count());
                packed += e.count();
            }
            boolean ownSlot = own && (uses[n] > 1 || anyTop[n]);
            b.add(ownSlot ? UnitLayout.Kind.OWN : UnitLayout.Kind.CHAINED, runs);
            unitOf[n] = next++;
        }
        this.units = new ShardedUnits(b.build(), comm, ops, shardParameters);
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
