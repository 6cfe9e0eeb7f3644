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
 * <p>Overlapped ({@link Offload#overlap()}, the default, when the inner optimizer {@link Optimizer#stepsInParts}): the
 * three moves are the stages of an {@link OffloadPipeline} over chunks of {@link OffloadPipeline#CHUNK} elements —
 * chunk i+1's gradients come down and chunk i−1's parameters go up on two copier threads while this thread updates
 * chunk i —, the same copies and the same element-wise updates, so the same bits. With {@link #deferUpload} the step
 * returns once the updates are done and the upload overlaps what follows (the next forward), which waits through
 * {@link #awaitParameters}; without it the step returns once the upload is done. The pipeline needs no buffer
 * besides the master and the landing buffer. Serial otherwise: the three moves one after the other.
 */
final class OffloadedOptimizer implements Optimizer {

    private final DeviceMemory device;
    private final MemorySegment params;
    /** Copies elements {@code [from, from + count)} of the range's gradients to host (fp32, or widened from 16 bits). */
    private final GradientsDown gradientsDown;
    /** The overlapped step, or null for the serial one. */
    private OffloadPipeline pipeline;
    private boolean deferUpload;
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
        this(spec, device, table, params, grads.byteSize(), (host, from, count) -> device.copyToHost(
                grads.asSlice(from * Float.BYTES, count * Float.BYTES), host), offset, length);
    }

    /** Fills {@code host} with elements {@code [from, from + count)} of the range's gradients, in fp32. */
    @FunctionalInterface
    private interface GradientsDown {
        void copy(MemorySegment host, long from, long count);
    }

    /**
     * Over gradients stored in 16 bits: elements {@code [offset, offset + length)} of {@code grads}, widened on the
     * device in chunks of at most {@link io.accel4j.nn.HalfGradients#CHUNK}, each copied into its place on the host.
     */
    OffloadedOptimizer(Offload spec, DeviceMemory device, ParameterTable table, MemorySegment params,
                       io.accel4j.nn.HalfGradients grads, long offset, long length) {
        this(spec, device, table, params, Math.multiplyExact(length, (long) Float.BYTES),
                (host, from, count) -> grads.chunks(offset + from, count, false, (o, f, n) -> device.copyToHost(f,
                        host.asSlice((o - offset - from) * Float.BYTES, n * Float.BYTES))), offset, length);
    }

    private OffloadedOptimizer(Offload spec, DeviceMemory device, ParameterTable table, MemorySegment params,
                               long gradBytes, GradientsDown gradientsDown, long offset,
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
        this.pipeline = spec.overlap() && inner.stepsInParts() ? new OffloadPipeline(length, OffloadPipeline.CHUNK)
                : null;
        if (params.byteSize() != master.byteSize() || grads != master.byteSize()) {
            close();
            throw new IllegalArgumentException("the offloaded optimizer's params/grads hold " + params.byteSize()
                    + "/" + grads + " bytes, its " + length + " parameters are " + master.byteSize());
        }
    }

    @Override
    public void step(int t, float lr, float gradScale) {
        awaitParameters(); // the last step's upload reads the master this step writes
        if (stale) {
            device.copyToHost(params, master);
            bytesDown += master.byteSize();
            stale = false;
        }
        if (pipeline == null) {
            gradientsDown.copy(hostGrads, 0, hostGrads.byteSize() / Float.BYTES);
            inner.step(t, lr, gradScale);
            device.copyToDevice(master, params);
        } else {
            pipeline.step((i, from, count) -> gradientsDown.copy(part(hostGrads, from, count), from, count),
                    (i, from, count) -> inner.stepPart(t, lr, gradScale, from, count),
                    (i, from, count) -> device.copyToDevice(part(master, from, count), part(params, from, count)),
                    !deferUpload);
        }
        bytesDown += hostGrads.byteSize();
        bytesUp += master.byteSize();
    }

    private static MemorySegment part(MemorySegment s, long from, long count) {
        return s.asSlice(from * Float.BYTES, count * Float.BYTES);
    }

    /**
     * Whether {@link #step} returns before the parameters are up (overlapped only): whoever reads the parameters
     * next then waits for the part it reads ({@link #awaitParameters}), e.g. a forward unit by unit. Off by default.
     *
     * @return whether the step overlaps its upload with what follows (false when serial)
     */
    boolean deferUpload(boolean defer) {
        deferUpload = defer && pipeline != null;
        return deferUpload;
    }

    /** Overlapped only: the pipeline takes {@code order}'s parts in turn and the steps defer their upload. */
    @Override
    public boolean deferUpload(java.util.List<Part> order) {
        if (pipeline == null) {
            return false;
        }
        OffloadPipeline next = new OffloadPipeline(master.byteSize() / Float.BYTES, order, OffloadPipeline.CHUNK);
        pipeline.awaitAll();
        pipeline.close();
        pipeline = next;
        return deferUpload(true);
    }

    /**
     * The overlapped step in chunks of {@code chunk} elements instead of {@link OffloadPipeline#CHUNK} (tests: many
     * chunks over a small network); between steps, overlapped only.
     */
    void rechunk(long chunk) {
        if (pipeline == null) {
            throw new IllegalStateException("the serial step has no chunks");
        }
        pipeline.awaitAll();
        pipeline.close();
        pipeline = new OffloadPipeline(master.byteSize() / Float.BYTES, chunk);
    }

    /** Whether the step is the overlapped pipeline. */
    boolean overlapped() {
        return pipeline != null;
    }

    @Override
    public void awaitParameters(long from, long count) {
        if (pipeline != null) {
            pipeline.awaitUploaded(from, count);
        }
    }

    @Override
    public void awaitParameters() {
        if (pipeline != null) {
            pipeline.awaitAll();
        }
    }

    @Override
    public void parametersReplaced() {
        awaitParameters(); // an upload still under way would overwrite them
        stale = true;
    }

    @Override
    public Map<String, MemorySegment> state() {
        awaitParameters(); // a checkpoint reads the state after the parameters; a resume writes the state
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
            if (pipeline != null) {
                pipeline.close();
            }
            if (inner != null) {
                inner.close();
            }
        } finally {
            arena.close();
        }
    }
}
