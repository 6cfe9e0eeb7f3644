package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Segment;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Weights;
import java.lang.foreign.MemorySegment;

/**
 * ZeRO-2's and ZeRO-3's {@link Weights}: the rank keeps only its {@link UnitShards shard} of the averaged gradients
 * persistently, and at stage 3 only its shard of the parameters (at stage 2 the whole parameter vector), with working
 * buffers for the units in use — one for the embeddings, two for layers, one for the final LayerNorm — for the
 * gradients, at stage 3 as many for the parameters ({@link UnitShards#workingElements}), at stage 2 with one layer a
 * scratch chunk ({@link #scratchElements}).
 *
 * <p><b>Parameters at stage 2</b> are one flat buffer, which the brackets leave alone; after AdamW has updated this
 * rank's runs of it, {@link #gatherUpdated} packs them into the (spent) gradient shard and all-gathers unit by unit.
 *
 * <p><b>Parameters at stage 3.</b> {@link #acquire} all-gathers the unit into its buffer unless it is still there from
 * an earlier use since the last update ({@link #parametersChanged}): the forward gathers every unit in turn, and
 * backward finds the last two layers, the final LayerNorm and the embeddings (used by the tied LM head at the
 * forward's end and backward's start) still gathered and gathers the other layers again. {@link #prefetch} starts
 * the next unit's {@code allGatherAsync} into its buffer when no unit in use occupies it, so layer l+1's gather
 * overlaps layer l's computation.
 *
 * <p><b>Gradients.</b> {@link #beginGradients} zeroes the unit's gradient buffer; for a layer, {@link #gradientsDone}
 * starts its {@code reduceScatterAsync(AVG)} straight into the rank's gradient shard in the first micro-batch,
 * overlapping the next layer's backward. In later micro-batches ({@code gradAccum} &gt; 1) the chunk is
 * reduce-scattered (blocking) into a buffer backward no longer reads — the layer's parameter buffer at stage 3, the
 * other layer's gradient buffer at stage 2 (the scratch chunk when L = 1) — and added to the shard: the sum over
 * micro-batches of the ranks' average, where plain DDP averages the ranks' sums — the same terms, rounded in another
 * order. The embeddings and the final LayerNorm have gradient buffers of their own, which therefore accumulate every
 * micro-batch of the step, as DDP's flat buffer does (the tied LM head writes wte's gradient first and the encoder
 * adds to it last): they are reduce-scattered once, by {@link #finishGradients}, which also waits for the layers'.
 *
 * <p><b>Memory.</b> Every buffer is in the model's memory ({@link Ops#memory()}) and the host touches none: copies,
 * zeroing and the later micro-batches' additions go through {@link DeviceMemory} and the ops, so on a GPU the
 * collectives (NCCL) run on device buffers. Host segments are only the whole vectors of {@link #setParameters} and
 * {@link #gatherParameters}.
 *
 * <p>Every method that may communicate is a collective: the ranks' models run in step. One thread.
 */
public final class ShardedWeights implements Weights {

    /** A working buffer and the unit it holds. */
    private static final class Slot {
        final MemorySegment buf;
        int unit = -1;
        boolean inUse;
        /** Gradients only: holds this step's gradients of {@link #unit}, not yet reduce-scattered. */
        boolean unreduced;
        Pending pending;

        Slot(MemorySegment buf) {
            this.buf = buf;
        }

        void await() {
            if (pending != null) {
                Pending p = pending;
                pending = null;
                p.await();
            }
        }
    }

    private final ParameterLayout layout;
    private final UnitShards shards;
    private final Communicator comm;
    /** The kernels (the later micro-batches' additions) and their memory, where every buffer is. */
    private final Ops ops;
    private final DeviceMemory memory;
    private final DeviceArena arena;
    /** Stage 3: the parameters this rank owns; null at stage 2. */
    private final MemorySegment paramShard;
    /** Stage 2: the whole parameter vector; null at stage 3. */
    private final MemorySegment whole;
    /** Stage 2 with one layer: a layer's chunk, for later micro-batches' reduce-scatters; else null. */
    private final MemorySegment scratch;
    private final MemorySegment gradShard;
    /** Embeddings, layer slot 0, layer slot 1 (the same when L = 1), final LayerNorm; null at stage 2. */
    private final Slot[] params;
    private final Slot[] grads;
    /** Per unit: whether its part of the gradient shard already holds an earlier micro-batch's gradients. */
    private final boolean[] inShard;
    private boolean closed;

    /**
     * Rank {@code comm.rank()}'s weights at ZeRO stage 3 ({@code shardParameters}: its shard of {@code full}) or 2 (a
     * copy of {@code full}), in {@code ops}' memory; {@code full} is the whole parameter vector, the same on every
     * rank, in that memory too (the model's flat parameters).
     */
    public ShardedWeights(ParameterLayout layout, Communicator comm, Ops ops, MemorySegment full, boolean shardParameters) {
        this.layout = layout;
        this.comm = comm;
        this.ops = ops;
        this.memory = ops.memory();
        this.arena = memory.arena();
        this.shards = new UnitShards(layout, comm.size(), comm.rank());
        this.inShard = new boolean[layout.units().size()];
        try {
            long bytes = shards.shardLength() * Float.BYTES;
            this.paramShard = shardParameters ? arena.allocate(bytes) : null;
            this.whole = shardParameters ? null : arena.allocate(layout.fp32Bytes());
            long spare = shardParameters ? 0 : scratchElements(layout, comm.size());
            this.scratch = spare == 0 ? null : floats(spare);
            this.gradShard = arena.allocate(bytes);
            this.params = shardParameters ? slots() : null;
            this.grads = slots();
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        place(full, true);
    }

    private Slot[] slots() {
        int L = layout.config().L();
        Slot[] s = new Slot[4];
        s[0] = new Slot(floats(shards.count(ParameterLayout.EMBEDDING)));
        s[1] = new Slot(floats(shards.count(ParameterLayout.layerUnit(0))));
        s[2] = L > 1 ? new Slot(floats(shards.count(ParameterLayout.layerUnit(1)))) : s[1];
        s[3] = new Slot(floats(shards.count(layout.finalUnit())));
        return s;
    }

    private MemorySegment floats(long n) {
        return arena.allocate(n * Float.BYTES);
    }

    /**
     * Stage 2's scratch, elements: a layer's chunk over {@code ranks} when there is one layer (no other layer's
     * gradient buffer to borrow), else 0.
     */
    public static long scratchElements(ParameterLayout layout, int ranks) {
        long layer = layout.units().get(ParameterLayout.layerUnit(0)).count();
        return layout.config().L() == 1 ? (layer + ranks - 1) / ranks : 0;
    }

    /** Whether unit {@code unit}'s gradient buffer is its own (embeddings, final LayerNorm), not shared by layers. */
    private boolean ownsGradientBuffer(int unit) {
        return unit == ParameterLayout.EMBEDDING || unit == layout.finalUnit();
    }

    /** Whether the parameters are sharded (stage 3) rather than whole (stage 2). */
    public boolean shardsParameters() {
        return paramShard != null;
    }

    @Override
    public MemorySegment wholeParams() {
        return whole;
    }

    /** The split. */
    UnitShards shards() {
        return shards;
    }

    /** Stage 3: the parameters this rank owns ({@link UnitShards#shardLength()} fp32, AdamW updates them); else null. */
    public MemorySegment paramShard() {
        return paramShard;
    }

    /** This rank's shard of the averaged gradients, valid after {@link #finishGradients}. */
    public MemorySegment gradShard() {
        return gradShard;
    }

    /**
     * Takes this rank's shard of {@code full} (Ψ fp32 in host memory, e.g. a checkpoint's); forgets the gathered
     * units.
     */
    void setParameters(MemorySegment full) {
        place(full, false);
    }

    /** {@link #setParameters} from {@code full} in the model's memory ({@code onDevice}) or the host's. */
    private void place(MemorySegment full, boolean onDevice) {
        if (whole != null) {
            copy(full.asSlice(0, layout.fp32Bytes()), whole, onDevice);
            return;
        }
        for (UnitShards.Piece p : shards.pieces()) {
            long bytes = p.length() * Float.BYTES;
            copy(full.asSlice(p.flat() * Float.BYTES, bytes), paramShard.asSlice(p.shard() * Float.BYTES, bytes),
                    onDevice);
        }
        parametersChanged();
    }

    /** All of {@code src} (in the model's memory if {@code onDevice}, else the host's) into device {@code dst}. */
    private void copy(MemorySegment src, MemorySegment dst, boolean onDevice) {
        if (onDevice) {
            memory.copy(src, dst);
        } else {
            memory.copyToDevice(src, dst);
        }
    }

    /** The shard was updated: the gathered units are stale. */
    void parametersChanged() {
        if (params == null) {
            return;
        }
        for (Slot s : params) {
            s.await();
            s.unit = -1;
        }
    }

    /** Waits for the gradients' reduce-scatters: the gradient shard is then the step's averaged gradient. */
    public void finishGradients() {
        for (int unit : new int[] {layout.finalUnit(), ParameterLayout.EMBEDDING}) {
            Slot g = slot(grads, unit);
            if (g.unreduced) {
                g.await();
                long n = shards.count(unit);
                g.pending = comm.reduceScatterAsync(g.buf.asSlice(0, n * Float.BYTES), shardOf(gradShard, unit), n,
                        DType.FP32, ReduceOp.AVG);
                g.unreduced = false;
                g.unit = -1;
            }
        }
        for (Slot s : grads) {
            s.await();
        }
    }

    /**
     * Collective: every unit gathered in turn; ranks passing {@code full} (Ψ fp32, host memory) receive the whole
     * parameter vector there in the flat layout, the others pass null. For checkpoints and
     * {@code Trainer.copyParameters}.
     */
    void gatherParameters(MemorySegment full) {
        gatherParameters(full, false);
    }

    /** {@link #gatherParameters(MemorySegment)} into {@code full} in the model's memory if {@code onDevice}. */
    void gatherParameters(MemorySegment full, boolean onDevice) {
        if (whole != null) {
            if (full != null) {
                out(whole, full.asSlice(0, layout.fp32Bytes()), onDevice);
            }
            return;
        }
        for (ParameterLayout.Unit u : layout.units()) {
            acquire(u.index());
            if (full != null) {
                MemorySegment buf = slot(params, u.index()).buf;
                for (Segment s : u.segments()) {
                    long bytes = s.count() * Float.BYTES;
                    out(buf.asSlice(s.packed() * Float.BYTES, bytes), full.asSlice(s.offset() * Float.BYTES, bytes),
                            onDevice);
                }
            }
            release(u.index());
        }
    }

    /** All of device {@code src} into {@code dst}, in the model's memory if {@code onDevice}, else the host's. */
    private void out(MemorySegment src, MemorySegment dst, boolean onDevice) {
        if (onDevice) {
            memory.copy(src, dst);
        } else {
            memory.copyToHost(src, dst);
        }
    }

    /**
     * Stage 2, after AdamW updated this rank's runs of the whole vector: every rank's updated runs into everyone's
     * vector. The runs are packed into the gradient shard (spent once the update is done), and each unit is
     * all-gathered into its gradient buffer and unpacked. Collective.
     */
    void gatherUpdated() {
        finishGradients();
        for (UnitShards.Piece p : shards.pieces()) {
            long bytes = p.length() * Float.BYTES;
            memory.copy(whole.asSlice(p.flat() * Float.BYTES, bytes), gradShard.asSlice(p.shard() * Float.BYTES,
                    bytes));
        }
        for (ParameterLayout.Unit u : layout.units()) {
            MemorySegment buf = slot(grads, u.index()).buf;
            comm.allGather(shardOf(gradShard, u.index()), buf.asSlice(0, u.count() * Float.BYTES), u.count(),
                    DType.FP32);
            for (Segment s : u.segments()) {
                long bytes = s.count() * Float.BYTES;
                memory.copy(buf.asSlice(s.packed() * Float.BYTES, bytes), whole.asSlice(s.offset() * Float.BYTES,
                        bytes));
            }
        }
    }

    private Slot slot(Slot[] slots, int unit) {
        if (unit == ParameterLayout.EMBEDDING) {
            return slots[0];
        }
        if (unit == layout.finalUnit()) {
            return slots[3];
        }
        return slots[1 + (unit - 1) % 2];
    }

    private MemorySegment shardOf(MemorySegment shard, int unit) {
        return shard.asSlice(shards.shardOffset(unit) * Float.BYTES, shards.chunkLength(unit) * Float.BYTES);
    }

    @Override
    public MemorySegment param(Param p, int layer) {
        if (whole != null) {
            ParameterLayout.Span t = layout.tensor(p);
            int unit = layout.unitOf(p, layer);
            return unit == ParameterLayout.EMBEDDING || unit == layout.finalUnit()
                    ? whole.asSlice(t.offset() * Float.BYTES, t.count() * Float.BYTES)
                    : whole.asSlice(t.layerOffset(layer) * Float.BYTES, t.count() / layout.config().L() * Float.BYTES);
        }
        return slice(params, "parameters", p, layer, true);
    }

    @Override
    public MemorySegment grad(Param p, int layer) {
        return slice(grads, "gradients", p, layer, false);
    }

    private MemorySegment slice(Slot[] slots, String what, Param p, int layer, boolean needsUse) {
        int unit = layout.unitOf(p, layer);
        Slot s = slot(slots, unit);
        if (s.unit != unit || needsUse && !s.inUse) {
            throw new IllegalStateException(what + " of " + p.fileName() + " (unit " + unit + ") read outside "
                    + (needsUse ? "acquire/release" : "beginGradients/gradientsDone"));
        }
        long n = layout.count(p) / (unit == ParameterLayout.EMBEDDING || unit == layout.finalUnit() ? 1
                : layout.config().L());
        return s.buf.asSlice(layout.packedOffset(p, layer) * Float.BYTES, n * Float.BYTES);
    }

    @Override
    public void acquire(int unit) {
        if (params == null) {
            return;
        }
        Slot s = slot(params, unit);
        if (s.inUse && s.unit != unit) {
            throw new IllegalStateException("unit " + unit + "'s buffer still holds unit " + s.unit + " in use");
        }
        if (s.unit != unit) {
            s.await();
            gather(s, unit).await();
        } else {
            s.await();
        }
        s.inUse = true;
    }

    private Pending gather(Slot s, int unit) {
        long n = shards.count(unit);
        s.unit = unit;
        return s.pending = comm.allGatherAsync(shardOf(paramShard, unit), s.buf.asSlice(0, n * Float.BYTES), n,
                DType.FP32);
    }

    @Override
    public void prefetch(int unit) {
        if (params == null) {
            return;
        }
        Slot s = slot(params, unit);
        if (s.inUse || s.unit == unit) {
            return;
        }
        s.await();
        gather(s, unit);
    }

    @Override
    public void release(int unit) {
        if (params != null) {
            slot(params, unit).inUse = false;
        }
    }

    @Override
    public void zeroGrad() {
        for (Slot g : grads) {
            g.await();
            g.unreduced = false; // an accumulation never finished is dropped
            g.unit = -1;
        }
        java.util.Arrays.fill(inShard, false);
    }

    @Override
    public void beginGradients(int unit) {
        Slot g = slot(grads, unit);
        g.await();
        if (!(g.unreduced && g.unit == unit)) { // an own buffer keeps accumulating over the step's micro-batches
            memory.zero(g.buf.asSlice(0, shards.count(unit) * Float.BYTES));
        }
        g.unit = unit;
    }

    @Override
    public void gradientsDone(int unit) {
        Slot g = slot(grads, unit);
        long n = shards.count(unit), mine = shards.chunkLength(unit);
        MemorySegment send = g.buf.asSlice(0, n * Float.BYTES), target = shardOf(gradShard, unit);
        if (ownsGradientBuffer(unit)) {
            g.unreduced = true; // reduce-scattered once per step, by finishGradients
            return;
        }
        if (!inShard[unit]) {
            g.pending = comm.reduceScatterAsync(send, target, n, DType.FP32, ReduceOp.AVG);
            inShard[unit] = true;
        } else {
            MemorySegment sum = scratch;
            Slot other = grads[1 + unit % 2]; // the other layer slot (the same one when L = 1)
            if (params == null && other != g) { // free until the next layer's beginGradients
                other.await();
                other.unit = -1;
                sum = other.buf;
            } else if (params != null) {
                Slot spare = slot(params, unit); // released: backward reads this unit's parameters no more
                if (spare.inUse) {
                    throw new IllegalStateException("unit " + unit + "'s gradients done before its parameters "
                            + "were released");
                }
                spare.await();
                spare.unit = -1;
                sum = spare.buf;
            }
            comm.reduceScatter(send, sum, n, DType.FP32, ReduceOp.AVG);
            ops.residualForward(target, target, sum, mine); // target += sum, in place
        }
        g.unit = -1;
    }

    /** Bytes of the working buffers (and stage 2's scratch): {@link #bytes()} less the shards and whole vector. */
    long workingBytes() {
        return bytes() - gradShard.byteSize() - (paramShard != null ? paramShard.byteSize() : whole.byteSize());
    }

    @Override
    public long bytes() {
        long b = gradShard.byteSize() + (paramShard != null ? paramShard.byteSize() : whole.byteSize())
                + (scratch != null ? scratch.byteSize() : 0);
        for (Slot[] slots : new Slot[][] {params, grads}) {
            for (int i = 0; slots != null && i < slots.length; i++) {
                if (i != 2 || slots[2] != slots[1]) {
                    b += slots[i].buf.byteSize();
                }
            }
        }
        return b;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            try {
                for (Slot[] slots : new Slot[][] {params, grads}) {
                    for (Slot s : slots == null ? new Slot[0] : slots) {
                        try {
                            s.await(); // no collective may still write a buffer being freed
                        } catch (RuntimeException e) {
                            // it failed: the communicator is broken and the buffer no longer in use
                        }
                    }
                }
            } finally {
                arena.close();
            }
        }
    }
}
