package io.accel4j.optim;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * AdamW (Loshchilov and Hutter), the backend's fused kernel ({@link io.accel4j.core.ops.OptimizerOps#adamw}): per
 * parameter {@code m = β1·m + (1−β1)·g}, {@code v = β2·v + (1−β2)·g²}, {@code p −= lr·(m̂/(√v̂ + ε) + λ·p)} with
 * bias-corrected m̂, v̂, λ only on the decayed groups. One fused call per learning-rate multiplier.
 */
public final class AdamW extends FusedOptimizer {

    /**
     * AdamW's hyperparameters ({@code lr} is the schedule's; the one here only checks the rest).
     *
     * @param decayAll weight decay on every parameter ({@code train_gpt2.c}), not only on those whose tensor says so
     */
    public record Spec(float beta1, float beta2, float eps, float weightDecay, boolean decayAll)
            implements OptimizerSpec {

        public Spec {
            new AdamWConfig(0, beta1, beta2, eps, weightDecay); // checks them
        }

        @Override
        public int stateFloatsPerParameter() {
            return 2;
        }

        @Override
        public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                List<Run> runs) {
            return new AdamW(this, ops, Groups.of(table, decayAll, runs), params, grads, OptimizerSpec.length(runs),
                    null, 0);
        }

        @Override
        public Optimizer createOverWhole(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                         List<Run> runs) {
            return new AdamW(this, ops, Groups.of(table, decayAll, runs), params, grads, OptimizerSpec.length(runs),
                    runs, table.count());
        }

        /** AdamW over 16-bit gradients, one fused call per fp32 chunk ({@link HalfGradAdamW}). */
        @Override
        public Optimizer create(Ops ops, ParameterTable table, MemorySegment params,
                                io.accel4j.nn.HalfGradients grads, long offset, long length) {
            return new HalfGradAdamW(this, ops, table, params, grads, offset, length);
        }
    }

    /** β1 0.9, β2 0.999, ε 1e-8 and weight decay {@code weightDecay} on the tensors that take it. */
    public static Spec of(float weightDecay) {
        return new Spec(0.9f, 0.999f, 1e-8f, weightDecay, false);
    }

    private final Spec spec;

    private AdamW(Spec spec, Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                  List<OptimizerSpec.Run> wholeRuns, long count) {
        super(ops, groups, params, grads, length, wholeRuns, count, "m", "v");
        this.spec = spec;
    }

    @Override
    void update(Slice s, List<AdamWRange> ranges, float lr, int t, float gradScale) {
        AdamWConfig c = new AdamWConfig(lr, spec.beta1(), spec.beta2(), spec.eps(), spec.weightDecay());
        ops.adamw(s.params(), s.grads(), buffer("m", s), buffer("v", s), ranges, c, t, gradScale);
    }

    @Override
    public String describe() {
        return "AdamW(beta1=" + spec.beta1() + ", beta2=" + spec.beta2() + ", eps=" + spec.eps() + ", weight_decay="
                + spec.weightDecay() + (spec.decayAll() ? " on every parameter" : "") + ")";
    }
}
