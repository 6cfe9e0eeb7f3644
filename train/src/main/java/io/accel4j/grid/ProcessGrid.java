package io.accel4j.grid;

import io.accel4j.collectives.Communicator;
import java.util.Objects;

/**
 * This rank's place in a {@link GridLayout} over {@code world} and its three groups, each split from the world
 * ({@link Communicator#split}): the tensor group (the T ranks of its (dp, pp), ranked by tp), the data-parallel group
 * (the D ranks of its (pp, tp), where ZeRO shards), and the pipeline group (the P stages of its (dp, tp), ranked by
 * stage). A collective of the world to make (every rank makes its grid, in the same order as its other collectives);
 * closes its groups, not the world.
 */
public final class ProcessGrid implements AutoCloseable {

    private final GridLayout layout;
    private final GridLayout.Coordinates at;
    private final Communicator world;
    private final Communicator tensor;
    private final Communicator data;
    private final Communicator pipeline;

    private ProcessGrid(GridLayout layout, Communicator world, Communicator tensor, Communicator data,
                        Communicator pipeline) {
        this.layout = layout;
        this.at = layout.coordinates(world.rank());
        this.world = world;
        this.tensor = tensor;
        this.data = data;
        this.pipeline = pipeline;
    }

    /**
     * Splits {@code world} into the groups of {@code layout}.
     *
     * @throws IllegalArgumentException when D·P·T is not the world's size (before any communication)
     */
    public static ProcessGrid of(Communicator world, GridLayout layout) {
        Objects.requireNonNull(world, "world");
        layout.requireWorld(world.size());
        GridLayout.Coordinates c = layout.coordinates(world.rank());
        Communicator t = null, d = null, p = null;
        try {
            t = world.split(layout.tensorColor(c), c.tp());
            d = world.split(layout.dataColor(c), c.dp());
            p = world.split(layout.pipelineColor(c), c.pp());
            return new ProcessGrid(layout, world, t, d, p);
        } catch (RuntimeException | Error e) {
            for (Communicator x : new Communicator[] {p, d, t}) {
                if (x != null) {
                    x.close();
                }
            }
            throw e;
        }
    }

    public GridLayout layout() {
        return layout;
    }

    /** This rank's (dp, pp, tp). */
    public GridLayout.Coordinates coordinates() {
        return at;
    }

    public Communicator world() {
        return world;
    }

    /** The T ranks sharing this rank's layers' weights (rank = tp). */
    public Communicator tensor() {
        return tensor;
    }

    /** The D replicas of this rank's shard (rank = dp): gradients averaged and ZeRO-sharded here. */
    public Communicator data() {
        return data;
    }

    /** The P stages of this rank's (dp, tp) (rank = pp): activations sent and received here. */
    public Communicator pipeline() {
        return pipeline;
    }

    @Override
    public void close() {
        try {
            pipeline.close();
        } finally {
            try {
                data.close();
            } finally {
                tensor.close();
            }
        }
    }
}
