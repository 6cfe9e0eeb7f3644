package io.accel4j.train.model;

import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.ParameterSource;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Units;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * The network's parameters through the current {@link Weights}: each tensor of the table named by its llm.c
 * tensor and block, each unit bracket passed on.
 */
final class WeightsSource implements ParameterSource, Units {
    Weights weights;
    java.util.function.IntConsumer beforeAcquire;
    private Param[] param;
    private int[] layer;

    WeightsSource(Weights weights) {
        this.weights = weights;
    }

    ParameterSource bind(ParameterTable table) {
        List<ParameterTable.Entry> entries = table.entries();
        param = new Param[entries.size()];
        layer = new int[entries.size()];
        for (int i = 0; i < param.length; i++) {
            String name = entries.get(i).name();
            param[i] = Param.values()[Gpt2Blocks.llmcKey(name)];
            layer[i] = Gpt2Blocks.layerOf(name);
        }
        return this;
    }

    @Override
    public MemorySegment param(int i) {
        return weights.param(param[i], layer[i]);
    }

    @Override
    public MemorySegment grad(int i) {
        return weights.grad(param[i], layer[i]);
    }

    @Override
    public void acquire(int unit) {
        if (beforeAcquire != null) {
            beforeAcquire.accept(unit);
        }
        weights.acquire(unit);
    }

    @Override
    public void prefetch(int unit) {
        weights.prefetch(unit);
    }

    @Override
    public void release(int unit) {
        weights.release(unit);
    }

    @Override
    public void beginGradients(int unit) {
        weights.beginGradients(unit);
    }

    @Override
    public void gradientsDone(int unit) {
        weights.gradientsDone(unit);
    }
}
