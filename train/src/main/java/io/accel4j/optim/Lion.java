package io.accel4j.optim;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Lion (Chen et al. 2023), the backend's fused kernel ({@link io.accel4j.core.ops.OptimizerOps#lion}): the update is
 * the sign of {@code β1·m + (1 − β1)·g}, so every parameter moves by exactly the learning rate;
 * {@code p = p·(1 − lr·λ) − lr·sign(c)} with decoupled decay only on the decayed groups, then
 * {@code m = β2·m + (1 − β2)·g}. One state value per parameter; its learning rate is typically 3–10× below AdamW's.
 */
public final class Lion extends FusedOptimizer {

    /** Lion's hyperparameters ({@code lr} is the schedule's). */
    public record Spec(float beta1, float beta2, float weightDecay) implements OptimizerSpec {

        public Spec {
            new LionConfig(0, beta1, beta2, weightDecay); // checks them
        }

        @Override
        public int stateFloatsPerParameter() {
            return 1;
        }

        @Override
        public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                List<Run> runs) {
            return new Lion(this, ops, Groups.of(table, false, runs), params, grads, OptimizerSpec.length(runs), null,
                    0);
        }

        @Override
        public Optimizer createOverWhole(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                         List<Run> runs) {
            return new Lion(this, ops, Groups.of(table, false, runs), params, grads, OptimizerSpec.length(runs), runs,
                    table.count());
        }
    }

    /** The paper's defaults, β1 0.9 and β2 0.99, with weight decay {@code weightDecay}. */
    public static Spec of(float weightDecay) {
        return new Spec(0.9f, 0.99f, weightDecay);
    }

    private final Spec spec;

    private Lion(Spec spec, Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                 List<OptimizerSpec.Run> wholeRuns, long count) {
        super(ops, groups, params, grads, length, wholeRuns, count, "m");
        this.spec = spec;
    }

    @Override
    void update(Slice s, List<AdamWRange> ranges, float lr, int t, float gradScale) {
        ops.lion(s.params(), s.grads(), buffer("m", s), ranges, new LionConfig(lr, spec.beta1(), spec.beta2(),
                spec.weightDecay()), gradScale);
    }

    @Override
    public String describe() {
        return "Lion(beta1=" + spec.beta1() + ", beta2=" + spec.beta2() + ", weight_decay=" + spec.weightDecay() + ")";
    }
}
