package io.accel4j.optim;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * AdamW on fp32 master weights with bf16 working weights (llm.c's {@code adamw_kernel3} with master weights): the
 * backend's fused {@link io.accel4j.core.ops.OptimizerOps#adamwBf16} updates {@code master}, {@code m} and {@code v}
 * exactly as {@link AdamW} updates its parameters, then rounds every master weight to bf16 stochastically, so that
 * updates smaller than a bf16 ulp still move the working weights on average; the network's fp32 parameter buffer
 * then holds those bf16 values widened ({@code castToFp32}), which is what its forward and backward compute with.
 *
 * <p>The random bits of step t are {@code CounterRng.bits(seed(t), i)} for parameter i of the whole vector, so a
 * ZeRO shard rounds its elements as the whole-vector optimizer would. The master copy starts as the parameters the
 * network holds when the optimizer is created (unrounded: the first step's rounding makes them bf16). State:
 * {@code master}, {@code m}, {@code v} (fp32, saved by a checkpoint); scratch: the bf16 copy, 2 bytes a parameter.
 */
public final class Bf16AdamW extends FusedOptimizer {

    /**
     * The hyperparameters, as {@link AdamW.Spec}'s, and the seed of the stochastic rounding.
     *
     * @param decayAll weight decay on every parameter, not only on those whose tensor says so
     */
    public record Spec(float beta1, float beta2, float eps, float weightDecay, boolean decayAll, long seed)
            implements OptimizerSpec {

        public Spec {
            new AdamWConfig(0, beta1, beta2, eps, weightDecay); // checks them
        }

        /** master, m and v; the bf16 scratch (half a float) is not state. */
        @Override
        public int stateFloatsPerParameter() {
            return 3;
        }

        @Override
        public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                List<Run> runs) {
            return new Bf16AdamW(this, ops, Groups.of(table, decayAll, runs), params, grads,
                    OptimizerSpec.length(runs), null, 0);
        }

        @Override
        public Optimizer createOverWhole(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                         List<Run> runs) {
            return new Bf16AdamW(this, ops, Groups.of(table, decayAll, runs), params, grads,
                    OptimizerSpec.length(runs), runs, table.count());
        }

        /** The rounding seed of step {@code t}: a fresh stream per step (a SplitMix64 step from the seed). */
        public long seed(int t) {
            long z = seed + 0x9E3779B97F4A7C15L * t;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }
    }

    /** β1 0.9, β2 0.999, ε 1e-8, weight decay {@code weightDecay} on the tensors that take it; rounding seed. */
    public static Spec of(float weightDecay, long seed) {
        return new Spec(0.9f, 0.999f, 1e-8f, weightDecay, false, seed);
    }

    private final Spec spec;
    private final MemorySegment bf16;
    /** Whether the parameters are packed as the gradients (one slice), not left whole. */
    private final boolean packed;

    private Bf16AdamW(Spec spec, Ops ops, Groups groups, MemorySegment params, MemorySegment grads, long length,
                      List<OptimizerSpec.Run> wholeRuns, long count) {
        super(ops, groups, params, grads, length, wholeRuns, count, "master", "m", "v");
        this.spec = spec;
        this.packed = wholeRuns == null;
        this.bf16 = arena().allocate(Math.max(1, length) * 2);
        for (Slice s : slices()) {
            ops.memory().copy(s.params(), buffer("master", s));
        }
    }

    /** Slice {@code s}'s part of the bf16 copy (all of it for packed parameters). */
    private MemorySegment bf16(Slice s) {
        return packed ? bf16 : bf16.asSlice(s.at() * 2, s.length() * 2);
    }

    @Override
    void update(Slice s, List<AdamWRange> ranges, float lr, int t, float gradScale) {
        AdamWConfig c = new AdamWConfig(lr, spec.beta1(), spec.beta2(), spec.eps(), spec.weightDecay());
        ops.adamwBf16(bf16(s), buffer("master", s), s.grads(), buffer("m", s), buffer("v", s), ranges, c, t,
                gradScale, spec.seed(t));
    }

    @Override
    boolean hasAfterStep() {
        return true;
    }

    /** The working weights: the bf16 copy every group's update wrote, widened into the network's fp32 buffer. */
    @Override
    void afterStep(int t) {
        for (Slice s : slices()) {
            ops.castToFp32(s.params(), bf16(s), DType.BF16, s.length(), 1f);
        }
    }

    @Override
    public String describe() {
        return "AdamW with fp32 master weights and bf16 working weights, stochastic rounding (beta1=" + spec.beta1()
                + ", beta2=" + spec.beta2() + ", eps=" + spec.eps() + ", weight_decay=" + spec.weightDecay()
                + (spec.decayAll() ? " on every parameter" : "") + ", seed=" + spec.seed() + ")";
    }
}
