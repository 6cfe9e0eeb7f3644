package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.HalfParameters;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * {@link Bf16AdamW} whose working weights are a bf16 store ({@link HalfParameters}, {@code --bf16-params}) rather than
 * a network's fp32 buffer: the same fused {@link io.accel4j.core.ops.OptimizerOps#adamwBf16} updates the fp32 master
 * weights and the moments and writes its stochastically rounded bf16 values straight into the store (a wide piece's
 * through the store's scratch), one call per piece of each range of each learning-rate group, each gradient read as
 * fp32 — a flat buffer, or a 16-bit store's fp32 chunks ({@link HalfGradients#chunks}). The update is element-wise and
 * its random bits are {@code CounterRng.bits(spec.seed(t), i)} for element i of the whole vector, so every master
 * weight, moment and bf16 value is the one {@link Bf16AdamW} computes over the fp32 buffer from the same gradients.
 *
 * <p>State: {@code master}, {@code m}, {@code v} (fp32, one per parameter, in the backend's memory). The master
 * starts as the store's values widened (the initial weights rounded to nearest even). The whole vector only.
 */
public final class Bf16StoreAdamW implements Optimizer {

    /** Where the gradients are read from, as fp32 pieces in vector order. */
    @FunctionalInterface
    public interface Gradients {
        /** Hands {@code fn} elements {@code [from, from + length)} of the gradient as fp32 pieces, in order. */
        void chunks(long from, long length, HalfGradients.Chunk fn);

        /** One flat fp32 buffer. */
        static Gradients of(MemorySegment flat) {
            Objects.requireNonNull(flat, "flat");
            return (from, length, fn) -> fn.accept(from, flat.asSlice(from * Float.BYTES, length * Float.BYTES),
                    length);
        }

        /** A 16-bit store, read in fp32 chunks. */
        static Gradients of(HalfGradients half) {
            Objects.requireNonNull(half, "half");
            return (from, length, fn) -> half.chunks(from, length, false, fn);
        }
    }

    private final Bf16AdamW.Spec spec;
    private final Ops ops;
    private final HalfParameters params;
    private final Gradients grads;
    private final Groups groups;
    private final DeviceArena arena;
    private final Map<String, MemorySegment> state = new LinkedHashMap<>();

    /**
     * AdamW of {@code spec} writing {@code params} ({@code table.count()} values) from {@code grads}.
     *
     * @throws IllegalArgumentException when the store is not the table's size
     */
    public Bf16StoreAdamW(Bf16AdamW.Spec spec, Ops ops, ParameterTable table, HalfParameters params,
                          Gradients grads) {
        this.spec = Objects.requireNonNull(spec, "spec");
        this.ops = Objects.requireNonNull(ops, "ops");
        this.params = Objects.requireNonNull(params, "params");
        this.grads = Objects.requireNonNull(grads, "grads");
        long n = table.count();
        if (params.count() != n) {
            throw new IllegalArgumentException("the bf16 store holds " + params.count() + " parameters, the table "
                    + "covers " + n + ": pass the store of the network whose table it is");
        }
        this.groups = Groups.of(table, spec.decayAll(), 0, n);
        this.arena = ops.memory().arena();
        try {
            state.put("master", arena.allocate(n * Float.BYTES));
            state.put("m", arena.allocate(n * Float.BYTES));
            state.put("v", arena.allocate(n * Float.BYTES));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        params.widen(state.get("master"));
    }

    @Override
    public void step(int t, float lr, float gradScale) {
        MemorySegment master = state.get("master"), m = state.get("m"), v = state.get("v");
        long seed = spec.seed(t);
        groups.forEachRange(lr, spec.beta1(), spec.beta2(), spec.eps(), spec.weightDecay(), (r, rc) -> {
            grads.chunks(r.offset(), r.length(), (o, g, n) -> params.update(o, n, (po, bf16, pn) ->
                    ops.adamwBf16(bf16, slice(master, po, pn), g.asSlice((po - o) * Float.BYTES,
                            pn * Float.BYTES), slice(m, po, pn), slice(v, po, pn), po, pn, rc, t, gradScale,
                            seed)));
        });
    }

    private static MemorySegment slice(MemorySegment s, long offset, long n) {
        return s.asSlice(offset * Float.BYTES, n * Float.BYTES);
    }

    /** The rounding seed of step {@code t} ({@link Bf16AdamW.Spec#seed}). */
    public long seed(int t) {
        return spec.seed(t);
    }

    @Override
    public Map<String, MemorySegment> state() {
        return java.util.Collections.unmodifiableMap(state);
    }

    @Override
    public DeviceMemory stateMemory() {
        return ops.memory();
    }

    @Override
    public String describe() {
        return "AdamW with fp32 master weights writing bf16 working weights (stochastic rounding) (beta1="
                + spec.beta1() + ", beta2=" + spec.beta2() + ", eps=" + spec.eps() + ", weight_decay="
                + spec.weightDecay() + (spec.decayAll() ? " on every parameter" : "") + ", seed=" + spec.seed() + ")";
    }

    @Override
    public void close() {
        arena.close();
    }
}
