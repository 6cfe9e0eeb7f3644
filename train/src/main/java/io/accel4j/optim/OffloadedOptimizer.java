package io.accel4j.optim;

import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.nn.ParameterTable;
import io.accel4j.core.memory.DeviceArena;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * One network's {@link Offload}ed optimizer: an fp32 master copy of the parameters and a landing buffer for the
 * gradients in host memory ({@link DeviceMemory#hostArena()}: page-locked on a GPU), and the inner optimizer over
 * them (its state allocated by the host backend, so in host memory too). A step is three moves, each a real copy
 * through the backend's {@link DeviceMemory}:
 * <ol>
 *   <li>gradients device → host ({@link DeviceMemory#copyToHost}; gradients stored in 16 bits,
 *       {@link io.accel4j.nn.HalfGradients}, are widened on the device chunk by chunk and each fp32 chunk copied
 *       down, so the host optimizer reads fp32 gradients as ever),</li>
 *   <li>the inner optimizer's step on the host (master, state),</li>
 *   <li>master → device parameters ({@link DeviceMemory#copyToDevice}).</li>
 * </ol>
 * The master is taken from the device's parameters before the first step and again after
 * {@link #parametersReplaced} (a resume), so the optimizer may be created before the network is initialised.
 *
 * <p>Not overlapped: the kernel contract has no per-unit "weights ready" event a forward could wait on, so the
 * upload completes before the step returns; on the CPU backend the copies are memcpy on the cores that would
 * otherwise compute, so overlap there would gain nothing.
 */
final class OffloadedOptimizer implements Optimizer {

    private final DeviceMemory device;
    private final MemorySegment params;
    /** Copies the gradients of the range into the host landing buffer (fp32, or widened from 16 bits). */
    private final java.util.function.Consumer<MemorySegment> gradientsDown;
    /** The master and the gradients' landing buffer: pinned where the backend's memory has it. */
    private final DeviceArena arena;
    private final MemorySegment master;
    private final MemorySegment hostGrads;
    private final Optimizer inner;
    private boolean stale = true;
    private long bytesDown;
    private long bytesUp;

    OffloadedOptimizer(Offload spec, DeviceMemory device, ParameterTable table, MemorySegment params,
                       MemorySegment grads, long offset, long length) {
        this(spec, device, table, params, grads.byteSize(), host -> device.copyToHost(grads, host), offset, length);
    }

    /**
     * Over gradients stored in 16 bits: elements {@code [offset, offset + length)} of {@code grads}, widened on the
     * device in chunks of at most {@link io.accel4j.nn.HalfGradients#CHUNK}, each copied into its place on the host.
     */
    OffloadedOptimizer(Offload spec, DeviceMemory device, ParameterTable table, MemorySegment params,
                       io.accel4j.nn.HalfGradients grads, long offset, long length) {
        this(spec, device, table, params, Math.multiplyExact(length, (long) Float.BYTES),
                host -> grads.chunks(offset, length, false, (o, f, n) -> device.copyToHost(f,
                        host.asSlice((o - offset) * Float.BYTES, n * Float.BYTES))), offset, length);
    }

    private OffloadedOptimizer(Offload spec, DeviceMemory device, ParameterTable table, MemorySegment params,
                               long gradBytes, java.util.function.Consumer<MemorySegment> gradientsDown, long offset,
                               long length) {
        this.device = device;
        this.arena = device.hostArena();
        this.params = params;
        this.gradientsDown = gradientsDown;
        long grads = gradBytes;
        try {
            long bytes = Math.multiplyExact(length, (long) Float.BYTES);
            this.master = arena.allocate(bytes);
            this.hostGrads = arena.allocate(bytes);
            this.inner = spec.inner().create(spec.host(), table, master, hostGrads, offset, length);
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        if (params.byteSize() != master.byteSize() || grads != master.byteSize()) {
            close();
            throw new IllegalArgumentException("the offloaded optimizer's params/grads hold " + params.byteSize()
                    + "/" + grads + " bytes, its " + length + " parameters are " + master.byteSize());
        }
    }

    @Override
    public void step(int t, float lr, float gradScale) {
        if (stale) {
            device.copyToHost(params, master);
            bytesDown += master.byteSize();
            stale = false;
        }
        gradientsDown.accept(hostGrads);
        bytesDown += hostGrads.byteSize();
        inner.step(t, lr, gradScale);
        device.copyToDevice(master, params);
        bytesUp += master.byteSize();
    }

    @Override
    public void parametersReplaced() {
        stale = true;
    }

    @Override
    public Map<String, MemorySegment> state() {
        return inner.state();
    }

    @Override
    public DeviceMemory stateMemory() {
        return inner.stateMemory();
    }

    /** The master and the gradients' landing buffer. */
    @Override
    public long hostScratchBytes() {
        return master.byteSize() + hostGrads.byteSize();
    }

    /** Host bytes: the master, the gradients' landing buffer and the inner optimizer's state. */
    long hostBytes() {
        return hostScratchBytes() + inner.stateBytes();
    }

    /** Bytes copied device → host (gradients, and the master when taken) and host → device so far. */
    long[] bytesMoved() {
        return new long[] {bytesDown, bytesUp};
    }

    @Override
    public String describe() {
        return inner.describe() + " offloaded to host memory";
    }

    @Override
    public void close() {
        try {
            if (inner != null) {
                inner.close();
            }
        } finally {
            arena.close();
        }
    }
}
