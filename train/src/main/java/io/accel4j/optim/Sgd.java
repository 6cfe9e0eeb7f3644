package io.accel4j.optim;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * SGD with momentum, PyTorch's semantics, the backend's fused kernel ({@link io.accel4j.core.ops.OptimizerOps#sgd}):
 * {@code g = grad + λ·p} (L2 weight decay, only on the decayed groups), {@code buf = g} on the first update and
 * {@code μ·buf + (1 − τ)·g} after, the step {@code d = buf}, or {@code g + μ·buf} with Nesterov; {@code p −= lr·d}.
 * Without momentum it keeps no state.
 */
public final class Sgd extends FusedOptimizer {

    /**
     * SGD's hyperparameters ({@code lr} is the schedule's).
     *
     * @param momentum    μ, in [0, 1); 0: plain SGD, no state
     * @param dampening   τ, in [0, 1]
     * @param weightDecay λ, L2 added to the gradient of the decayed groups
     * @param nesterov    Nesterov momentum (needs μ &gt; 0 and τ = 0)
     */
    public record Spec(float momentum, float dampening, float weightDecay, boolean nesterov) implements OptimizerSpec {

        public Spec {
            new SgdConfig(0, momentum, dampening, weightDecay, nesterov); // checks them
        }

        @Override
        public int stateFloatsPerParameter() {
            return momentum == 0 ? 0 : 1;
        }

        @Override
        public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                List<Run> runs) {
            return new Sgd(this, ops, Groups.of(table, false, runs), params, grads, OptimizerSpec.length(runs), null,
                    0);
        }

        @Override
        public Optimizer createOverWhole(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                         List<Run> runs) {
            return new Sgd(this, ops, Groups.of(table, false, runs), params, grads, OptimizerSpec.length(runs), runs,
                    table.count());
        }
    }

    /** Momentum {@code momentum}, no dampening, no Nesterov, weight decay {@code weightDecay}. */
    public static Spec of(float momentum, float weightDecay) {
        return new Spec(momentum, 0f, weightDecay, false);
    }

    private final Spec spec;

    private Sgd(Spec spec, Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                List<OptimizerSpec.Run> wholeRuns, long count) {
        super(ops, groups, params, grads, length, wholeRuns, count,
                spec.momentum() == 0 ? new String[0] : new String[] {"momentum"});
        this.spec = spec;
    }

    @Override
    void update(Slice s, List<AdamWRange> ranges, float lr, int t, float gradScale) {
        SgdConfig c = new SgdConfig(lr, spec.momentum(), spec.dampening(), spec.weightDecay(), spec.nesterov());
        MemorySegment buf = spec.momentum() == 0 ? MemorySegment.NULL : buffer("momentum", s);
        ops.sgd(s.params(), s.grads(), buf, ranges, c, t, gradScale);
    }

    @Override
    public String describe() {
        return "SGD(momentum=" + spec.momentum() + ", dampening=" + spec.dampening() + ", weight_decay="
                + spec.weightDecay() + (spec.nesterov() ? ", nesterov" : "") + ")";
    }
}
