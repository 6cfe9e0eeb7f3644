package io.accel4j.pipeline;

import io.accel4j.nn.Module;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.ShapeException;
import io.accel4j.nn.StageNetwork;
import java.util.List;
import java.util.function.Supplier;

/**
 * A model that is a {@link Sequential}, cut between its children: stage {@code [from, to)} is a sequential of the same
 * name over children {@code from … to−1} of a new tree, so every parameter keeps its name. A child that shares a
 * parameter with a child of another stage (a head tied to an embedding) cannot be split off; its stage refuses to
 * build, naming it.
 */
public final class SequentialStages implements StagedModel {

    private final Supplier<? extends Module> model;
    private final List<StageNetwork.LayerSize> sizes;
    private final List<String> names;
    private final int inWidth;

    /**
     * The children of the sequential {@code model} makes (called once now to measure them, then once per stage),
     * taking {@code inWidth} values per position (1 for token ids).
     *
     * @throws ShapeException when the model is not a sequential or its children do not fit together
     */
    public SequentialStages(Supplier<? extends Module> model, int inWidth, int maxB, int maxT) {
        this.model = model;
        this.inWidth = inWidth;
        Sequential root = root(model.get());
        this.names = root.children().stream().map(m -> m.name().isEmpty() ? "#" : m.name()).toList();
        this.sizes = StageNetwork.measure(root.children(), inWidth, maxB, maxT);
    }

    private static Sequential root(Module m) {
        if (!(m instanceof Sequential s)) {
            throw new ShapeException("a pipeline cuts a Sequential between its children; the model is a "
                    + m.getClass().getSimpleName());
        }
        return s;
    }

    @Override
    public int layers() {
        return sizes.size();
    }

    @Override
    public long[] parameters() {
        return sizes.stream().mapToLong(StageNetwork.LayerSize::parameters).toArray();
    }

    @Override
    public String layerName(int i) {
        return names.get(i);
    }

    @Override
    public int inputWidth(int i) {
        return i == 0 ? inWidth : sizes.get(i - 1).outWidth();
    }

    @Override
    public Module stage(int from, int to) {
        Sequential root = root(model.get());
        return new Sequential(root.name(), root.children().subList(from, to));
    }
}
