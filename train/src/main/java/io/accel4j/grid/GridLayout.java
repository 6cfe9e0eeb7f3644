package io.accel4j.grid;

/**
 * A D × P × T process grid laid out as Megatron-LM does: tensor-parallel ranks innermost (neighbours share a node's
 * fastest links), then data-parallel, pipeline stages outermost: world rank {@code = pp·(D·T) + dp·T + tp}. Pure
 * arithmetic: {@link ProcessGrid} makes the communicators.
 *
 * @param dp D, data-parallel replicas
 * @param pp P, pipeline stages
 * @param tp T, tensor-parallel ranks
 */
public record GridLayout(int dp, int pp, int tp) {

    /** A rank's place in the grid. */
    public record Coordinates(int dp, int pp, int tp) {}

    public GridLayout {
        if (dp < 1 || pp < 1 || tp < 1) {
            throw new IllegalArgumentException("the process grid needs data-parallel, pipeline and tensor-parallel "
                    + "sizes >= 1, got --dp " + dp + ", --pp " + pp + ", --tp " + tp);
        }
    }

    /** The layout of {@code world} ranks with {@code P} pipeline stages and {@code T} tensor ranks: D = world/(P·T). */
    public static GridLayout of(int world, int pp, int tp) {
        if (pp < 1 || tp < 1) {
            throw new IllegalArgumentException("--pp and --tp must be >= 1, got --pp " + pp + ", --tp " + tp);
        }
        if (world % ((long) pp * tp) != 0) {
            throw new IllegalArgumentException("--tp " + tp + " × --pp " + pp + " = " + (long) pp * tp
                    + " does not divide the " + world + " ranks: the ranks are D·T·P (data-parallel × tensor × "
                    + "pipeline)");
        }
        return new GridLayout(world / (pp * tp), pp, tp);
    }

    /** D·P·T. */
    public int size() {
        return Math.multiplyExact(Math.multiplyExact(dp, pp), tp);
    }

    /** Throws unless D·P·T is {@code world}, naming the three sizes and the world's. */
    public GridLayout requireWorld(int world) {
        if ((long) dp * pp * tp != world) {
            throw new IllegalArgumentException("--dp " + dp + " × --tp " + tp + " × --pp " + pp + " = "
                    + (long) dp * pp * tp + " ranks, but the world has " + world + ": D·T·P must equal the number of "
                    + "ranks (--ranks or mpirun's -np)");
        }
        return this;
    }

    /** The coordinates of world rank {@code rank}. */
    public Coordinates coordinates(int rank) {
        if (rank < 0 || rank >= size()) {
            throw new IllegalArgumentException("rank " + rank + " is outside the grid of " + size() + " ranks");
        }
        return new Coordinates(rank / tp % dp, rank / (dp * tp), rank % tp);
    }

    /** The world rank at {@code (dp, pp, tp)}. */
    public int rank(int dpRank, int ppRank, int tpRank) {
        return ppRank * (dp * tp) + dpRank * tp + tpRank;
    }

    /** The tensor group of a rank: same (pp, dp); its color and, as the key, its tensor rank. */
    int tensorColor(Coordinates c) {
        return c.pp() * dp + c.dp();
    }

    /** The data-parallel group of a rank: same (pp, tp). */
    int dataColor(Coordinates c) {
        return c.pp() * tp + c.tp();
    }

    /** The pipeline group of a rank: same (dp, tp), ordered by stage. */
    int pipelineColor(Coordinates c) {
        return c.dp() * tp + c.tp();
    }

    @Override
    public String toString() {
        return "dp " + dp + " × pp " + pp + " × tp " + tp;
    }
}
