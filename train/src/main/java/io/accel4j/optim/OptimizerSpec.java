package io.accel4j.optim;

import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * An optimizer's hyperparameters, before it is bound to a network: {@link #create} allocates its state for one
 * network's parameters; {@link #stateFloatsPerParameter} lets a memory plan count the bytes first.
 */
public interface OptimizerSpec {

    /** Fp32 state values per parameter (AdamW 2, SGD with momentum 1, Lion 1). */
    int stateFloatsPerParameter();

    /**
     * An optimizer of {@code params} (laid out by {@code table}) from {@code grads}, its state allocated in
     * {@code ops}' memory and zeroed.
     */
    default Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads) {
        return create(ops, table, params, grads, 0, table.count());
    }

    /**
     * An optimizer of the elements {@code [offset, offset + length)} of the parameter vector laid out by {@code table}
     * (a ZeRO shard): {@code params} and {@code grads} hold just those {@code length} elements, and the state is
     * allocated for them only. Each element is updated as the whole-vector optimizer would update it.
     */
    default Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads, long offset,
                             long length) {
        return create(ops, table, params, grads, List.of(new Run(offset, 0, length)));
    }

    /**
     * {@code length} elements of the parameter vector at {@code offset}, held at {@code at} of an optimizer's buffers.
     */
    record Run(long offset, long at, long length) {}

    /**
     * An optimizer of the parameter vector's {@code runs}, packed in {@code params} and {@code grads} as each run's
     * {@code at} says (ZeRO-3's shard: a chunk of every unit, each unit's tensors not contiguous in the vector); the
     * state is allocated for {@code Σ length} elements, laid out as the buffers. Each element is updated as the
     * whole-vector optimizer would update it.
     */
    Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads, List<Run> runs);

    /**
     * An optimizer of the parameter vector's {@code runs} as {@link #create(Ops, ParameterTable, MemorySegment,
     * MemorySegment, List)}, but with the parameters left whole: {@code params} is the whole vector laid out by
     * {@code table} ({@code table.count()} fp32), each run's parameters at its {@code offset}, while {@code grads}
     * and the state are packed at each run's {@code at} (the trainer's ZeRO-2, where every rank keeps all parameters
     * and only its shard of the gradients and state, a chunk of every unit). Each run is updated by its own fused
     * calls, each element as the whole-vector optimizer would update it.
     *
     * @throws IllegalArgumentException by default: a spec that cannot update parameters in place of the whole vector
     */
    default Optimizer createOverWhole(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                                      List<Run> runs) {
        throw new IllegalArgumentException(getClass().getSimpleName() + " cannot update a shard whose parameters are "
                + "left whole (ZeRO-2 over units): its optimizer keeps the parameters packed as the gradients");
    }

    /**
     * An optimizer of the whole vector of {@code params} (laid out by {@code table}) from gradients stored in 16 bits
     * ({@link io.accel4j.nn.HalfGradients}, read in fp32 chunks); its state allocated in {@code ops}' memory, zeroed.
     * Only {@link AdamW} has one yet.
     *
     * @throws IllegalArgumentException for an optimizer that reads fp32 gradients only
     */
    default Optimizer create(Ops ops, ParameterTable table, MemorySegment params, io.accel4j.nn.HalfGradients grads) {
        return create(ops, table, params, grads, 0, table.count());
    }

    /**
     * {@link #create(Ops, ParameterTable, MemorySegment, io.accel4j.nn.HalfGradients)} for the elements
     * {@code [offset, offset + length)} of the vector only (ZeRO-1's shard): {@code params} holds just those
     * {@code length} elements, the state is allocated for them, and the gradients are read from the whole 16-bit
     * store at their offsets. Each element is updated as the whole-vector optimizer would update it.
     *
     * @throws IllegalArgumentException for an optimizer that reads fp32 gradients only
     */
    default Optimizer create(Ops ops, ParameterTable table, MemorySegment params, io.accel4j.nn.HalfGradients grads,
                             long offset, long length) {
        Class<?> c = getClass().getEnclosingClass() != null ? getClass().getEnclosingClass() : getClass();
        throw new IllegalArgumentException("16-bit gradients are read by AdamW only yet, not by " + c.getSimpleName()
                + ": store the gradients in fp32 or use AdamW");
    }

    /** The elements {@code runs} hold. */
    static long length(List<Run> runs) {
        long n = 0;
        for (Run r : runs) {
            n = Math.addExact(n, r.length());
        }
        return n;
    }
}
