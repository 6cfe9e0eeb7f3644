package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.parallel.UnitLayout.Segment;
import io.accel4j.train.parallel.UnitLayout.Unit;
import java.util.ArrayList;
import java.util.List;

/**
 * ZeRO-3's split of the parameters over N ranks, unit by unit ({@link UnitLayout#units()}: for GPT-2 the embeddings,
 * each layer, the final LayerNorm). A layer's twelve tensor slices are not contiguous in the flat layout, so each unit is
 * <em>packed</em> (its segments one after another, {@link Segment#packed}) and the packing is cut as {@link Chunks}
 * cuts it: rank r owns chunk r of every unit, and its shard is those chunks unit after unit. A unit is then one
 * {@code allGather} (its parameters) and one {@code reduceScatter} (its gradients) of {@code count} elements.
 *
 * <p>A rank's shard holds {@code Σ_u ⌊(r+1)·|u|/N⌋ − ⌊r·|u|/N⌋} elements: at most {@code ⌈Ψ/N⌉ + U − 1}, as each of
 * the U units' chunks rounds separately. Its elements, read back in flat order, are the {@link Piece}s: for AdamW
 * (whose decay and element offsets follow the flat layout) and for whole-model checkpoints.
 */
public final class UnitShards {

    /** {@code length} elements at {@code flat} of the flat layout that are at {@code shard} of a rank's shard. */
    public record Piece(long flat, long shard, long length) {}

    private final UnitLayout layout;
    private final int ranks;
    private final int rank;
    private final long[] shardOffset;
    private final long shardLength;

    /** Rank {@code rank}'s view of GPT-2's {@code layout} split over {@code ranks}. */
    public UnitShards(ParameterLayout layout, int ranks, int rank) {
        this(UnitLayout.of(layout), ranks, rank);
    }

    /** Rank {@code rank}'s view of {@code layout} split over {@code ranks}. */
    public UnitShards(UnitLayout layout, int ranks, int rank) {
        if (ranks < 1 || rank < 0 || rank >= ranks) {
            throw new IllegalArgumentException("rank must be in [0, ranks), ranks >= 1, got rank " + rank + " of "
                    + ranks);
        }
        this.layout = layout;
        this.ranks = ranks;
        this.rank = rank;
        List<Unit> units = layout.units();
        this.shardOffset = new long[units.size()];
        long at = 0;
        for (Unit u : units) {
            shardOffset[u.index()] = at;
            at += Chunks.length(u.count(), ranks, rank);
        }
        this.shardLength = at;
    }

    /** The layout split. */
    UnitLayout layout() {
        return layout;
    }

    /** Elements of unit {@code unit}. */
    long count(int unit) {
        return layout.units().get(unit).count();
    }

    /** Where this rank's chunk of unit {@code unit} starts in the unit's packing. */
    long chunkStart(int unit) {
        return Chunks.start(count(unit), ranks, rank);
    }

    /** Elements of this rank's chunk of unit {@code unit}. */
    long chunkLength(int unit) {
        return Chunks.length(count(unit), ranks, rank);
    }

    /** Where this rank's chunk of unit {@code unit} starts in its shard. */
    long shardOffset(int unit) {
        return shardOffset[unit];
    }

    /** Elements of this rank's shard. */
    public long shardLength() {
        return shardLength;
    }

    /** This rank. */
    int rank() {
        return rank;
    }

    /** The number of ranks. */
    int ranks() {
        return ranks;
    }

    /** This rank's shard as runs of the flat layout, in shard order. */
    public List<Piece> pieces() {
        List<Piece> out = new ArrayList<>();
        for (Unit u : layout.units()) {
            long lo = chunkStart(u.index()), hi = lo + chunkLength(u.index());
            for (Segment s : u.segments()) {
                long a = Math.max(lo, s.packed()), b = Math.min(hi, s.packed() + s.count());
                if (a < b) {
                    out.add(new Piece(s.offset() + a - s.packed(), shardOffset[u.index()] + a - lo, b - a));
                }
            }
        }
        return out;
    }

    /** The largest rank's shard, elements: what every rank allocates room for in a plan. */
    public static long largestShard(ParameterLayout layout, int ranks) {
        return largestShard(UnitLayout.of(layout), ranks);
    }

    /** {@link #largestShard(ParameterLayout, int)} of any unit layout. */
    public static long largestShard(UnitLayout layout, int ranks) {
        long most = 0;
        for (int r = 0; r < ranks; r++) {
            most = Math.max(most, new UnitShards(layout, ranks, r).shardLength());
        }
        return most;
    }

    /**
     * Elements of the working buffers a rank holds for gathered parameters, and as many again for gradients: one unit
     * of embeddings, two layers (the one in use and the next, gathered or reduce-scattered while it computes; one
     * when L = 1) and the final LayerNorm.
     */
    public static long workingElements(ParameterLayout layout) {
        return UnitLayout.of(layout).workingElements();
    }
}
