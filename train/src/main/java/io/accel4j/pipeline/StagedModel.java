package io.accel4j.pipeline;

import io.accel4j.nn.Module;
import io.accel4j.nn.ParameterTable;
import java.util.List;

/**
 * A model as a pipeline sees it: {@link #layers()} layers in a row, cut into contiguous stages, each built as a module
 * tree of its own ({@link #stage}) whose parameter names are the whole model's, so that stages together hold exactly
 * the whole model's tensors (a checkpoint gathers them by name). The first stage holds what comes before the first
 * layer (the embedding), the last what comes after the last (the head and loss). {@link SequentialStages} splits any
 * {@link io.accel4j.nn.Sequential}'s children; {@link Gpt2Stages} splits GPT-2's blocks.
 */
public interface StagedModel {

    /**
     * Two tensors that are one parameter of the whole model but live on the first and the last stage (a head tied to
     * the embedding): the last stage's copy starts as the first's, and their gradients are summed before each update,
     * so both stay the same.
     */
    record Tie(String first, String last) {}

    /** The layers stages are cut between. */
    int layers();

    /** Each layer's parameters, including what its stage always carries (embedding, head): the balancing cost. */
    long[] parameters();

    /** Layer {@code i}'s name, for the printed split. */
    String layerName(int i);

    /** Values per position that layer {@code i} takes (1 for the token ids of layer 0 of a language model). */
    int inputWidth(int i);

    /** A new module tree of layers {@code [from, to)} (each call a new tree: a module has one place). */
    Module stage(int from, int to);

    /** The order of the parameter tensors in a stage's flat buffer (the whole model's order where it applies). */
    default ParameterTable.Order order() {
        return ParameterTable.Order.declaration();
    }

    /** The tensors shared between the first and the last stage when they are different stages. */
    default List<Tie> ties() {
        return List.of();
    }
}
