package io.accel4j.optim;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * ZeRO-Offload's idea as a decorator of any optimizer spec: the optimizer runs on the host ({@code host}, a CPU
 * backend: the Vector API kernels) over an fp32 master copy of the parameters and its state (AdamW's m and v), all in
 * host memory, while the network's parameters and gradients stay in the backend's memory. Each step copies the
 * gradients down, updates on the host and copies the updated parameters up ({@link OffloadedOptimizer}). The
 * backend's memory then holds no optimizer state: 8 bytes a parameter less for AdamW in fp32.
 *
 * <p>The host optimizer is {@code inner}'s own, created over host buffers, so with a CPU backend the result is the
 * same bits as without offload: the same kernel on the same values. With {@code overlap} the three moves are
 * pipelined over chunks (copier threads bring gradients down and take parameters up while the host updates the
 * chunk between them, {@link OffloadPipeline}): the same copies and updates, so the same bits, whenever the inner
 * optimizer {@link Optimizer#stepsInParts steps in parts} (the fused fp32 ones); serial otherwise.
 *
 * @param inner   the optimizer run on the host
 * @param host    the host backend it runs on; its {@link Ops#memory()} must be host memory
 * @param overlap whether the step is pipelined (the default) or three serial moves
 */
public record Offload(OptimizerSpec inner, Ops host, boolean overlap) implements OptimizerSpec {

    /** Overlapped: {@code Offload(inner, host, true)}. */
    public Offload(OptimizerSpec inner, Ops host) {
        this(inner, host, true);
    }

    public Offload {
        Objects.requireNonNull(inner, "inner");
        Objects.requireNonNull(host, "host");
        if (!host.memory().hostAccessible()) {
            throw new IllegalArgumentException("an offloaded optimizer runs on a host backend, got "
                    + host.describe() + " (" + host.memory().describe() + ")");
        }
        if (inner instanceof Offload) {
            throw new IllegalArgumentException("the optimizer is offloaded already");
        }
    }

    /** The state floats per parameter on the host; the backend's memory holds none. */
    @Override
    public int stateFloatsPerParameter() {
        return inner.stateFloatsPerParameter();
    }

    /**
     * Host bytes per parameter: the fp32 master copy and the gradients' landing buffer (4 each) and the inner
     * optimizer's state.
     */
    public long hostBytesPerParameter() {
        return 2L * Float.BYTES + (long) inner.stateFloatsPerParameter() * Float.BYTES;
    }

    @Override
    public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads, long offset,
                            long length) {
        DeviceMemory device = ops.memory();
        return new OffloadedOptimizer(this, device, table, params, grads, offset, length);
    }

    /**
     * Over gradients stored in 16 bits ({@link io.accel4j.nn.HalfGradients}): each step widens the range's gradients
     * on the device chunk by chunk and copies the fp32 chunks into the host landing buffer, so {@code inner} — any
     * optimizer, not only AdamW — runs on the host over fp32 gradients as without 16-bit storage.
     */
    @Override
    public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, io.accel4j.nn.HalfGradients grads,
                            long offset, long length) {
        return new OffloadedOptimizer(this, ops.memory(), table, params, grads, offset, length);
    }

    /**
     * One run at the start of the buffers (a whole vector or a ZeRO-1/2 chunk) is offloaded; the scattered runs of a
     * ZeRO-3 shard are not yet.
     *
     * @throws IllegalArgumentException for several runs, or one not at the buffers' start
     */
    @Override
    public Optimizer create(Ops ops, ParameterTable table, MemorySegment params, MemorySegment grads,
                            java.util.List<Run> runs) {
        if (runs.size() != 1 || runs.get(0).at() != 0) {
            throw new IllegalArgumentException("the offloaded optimizer takes one contiguous range of the parameters "
                    + "(one rank, DDP, ZeRO-1/2), not ZeRO-3's " + runs.size() + " runs yet");
        }
        return create(ops, table, params, grads, runs.get(0).offset(), runs.get(0).length());
    }

    /** The memory the offloaded state lives in. */
    static DeviceMemory hostMemory() {
        return HostMemory.INSTANCE;
    }
}
