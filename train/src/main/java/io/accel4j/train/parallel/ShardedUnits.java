package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.parallel.UnitLayout.Segment;
import io.accel4j.train.parallel.UnitLayout.Unit;
import java.lang.foreign.MemorySegment;

/**
 * ZeRO-2's and ZeRO-3's parameters and gradients for any {@link UnitLayout} (GPT-2's through {@link ShardedWeights},
 * a module tree's through {@code fit.UnitSharding}): the rank keeps only its {@link UnitShards shard} of the averaged
 * gradients persistently, and at stage 3 only its shard of the parameters (at stage 2 the whole parameter vector),
 * with working buffers for the units in use — the layout's slots: for GPT-2 one for the embeddings, two for layers,
 * one for the final LayerNorm — for the gradients, at stage 3 as many for the parameters
 * ({@link UnitLayout#workingElements}), at stage 2 with a chain of one unit a scratch chunk ({@link #scratchElements}).
 * A tensor is named by its unit, its place in the unit's packing and its length ({@link #param}, {@link #grad}).
 *
 * <p><b>Parameters at stage 2</b> are one flat buffer, which the brackets leave alone; after AdamW has updated this
 * rank's runs of it, {@link #gatherUpdated} packs them into the (spent) gradient shard and all-gathers unit by unit.
 *
 * <p><b>Parameters at stage 3.</b> {@link #acquire} all-gathers the unit into its buffer unless it is still there from
 * an earlier use since the last update ({@link #parametersChanged}): the forward gathers every unit in turn, and
 * backward finds the last two chained units and the units of their own slots (GPT-2: the final LayerNorm and the
 * embeddings, used by the tied LM head at the forward's end and backward's start) still gathered and gathers the
 * other layers again. {@link #prefetch} starts
 * the next unit's {@code allGatherAsync} into its buffer when no unit in use occupies it, so layer l+1's gather
 * overlaps layer l's computation.
 *
 * <p><b>Gradients.</b> {@link #beginGradients} zeroes the unit's gradient buffer; for a chained unit (a layer), {@link #gradientsDone}
 * starts its {@code reduceScatterAsync(AVG)} straight into the rank's gradient shard in the first micro-batch,
 * overlapping the next layer's backward. In later micro-batches ({@code gradAccum} &gt; 1) the chunk is
 * reduce-scattered (blocking) into a buffer backward no longer reads — the layer's parameter buffer at stage 3, the
 * other chained slot at stage 2 (the scratch chunk when the chain has one) — and added to the shard: the sum over
 * micro-batches of the ranks' average, where plain DDP averages the ranks' sums — the same terms, rounded in another
 * order. Units with buffers of their own (GPT-2's embeddings and final LayerNorm) therefore accumulate every
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
public final class ShardedUnits implements AutoCloseable {

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

    private final UnitLayout layout;
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
    /** The layout's slots (GPT-2: embeddings, layer slot 0, layer slot 1 unless L = 1, final LayerNorm); null at stage 2. */
    private final Slot[] params;
    private final Slot[] grads;
    /** Per unit: whether its part of the gradient shard already holds an earlier micro-batch's gradients. */
    private final boolean[] inShard;
    private boolean closed;

    /**
     * Rank {@code comm.rank()}'s buffers at ZeRO stage 3 ({@code shardParameters}: its shard of the parameters) or 2
     * (the whole vector), in {@code ops}' memory, zeroed: set the parameters with {@link #placeFromDevice} or
     * {@link #setParameters} before the first use.
     */
    public ShardedUnits(UnitLayout layout, Communicator comm, Ops ops, boolean shardParameters) {
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
    }

    private Slot[] slots() {
        Slot[] s = new Slot[layout.slots()];
        for (int i = 0; i < s.length; i++) {
            s[i] = new Slot(floats(layout.slotElements(i)));
        }
        return s;
    }

    private MemorySegment floats(long n) {
        return arena.allocate(n * Float.BYTES);
    }

    /**
     * Stage 2's scratch, elements: a chained unit's chunk over {@code ranks} when the chain has one unit (no other
     * chained slot to borrow; GPT-2 with one layer), else 0.
     */
    public static long scratchElements(UnitLayout layout, int ranks) {
        boolean alone = layout.units().stream().anyMatch(u -> !layout.ownsSlot(u.index())
                && layout.otherChainSlot(u.index()) < 0);
        return alone ? (layout.largestChained() + ranks - 1) / ranks : 0;
    }

    /** The layout. */
    public UnitLayout layout() {
        return layout;
    }

    /** This rank's split of the layout. */
    public UnitShards shards() {
        return shards;
    }

    /** Whether the parameters are sharded (stage 3) rather than whole (stage 2). */
    public boolean shardsParameters() {
        return paramShard != null;
    }

    /** Stage 2: the whole parameter vector; null at stage 3. */
    public MemorySegment wholeParams() {
        return whole;
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
    public void setParameters(MemorySegment full) {
        place(full, false);
    }

    /** {@link #setParameters} from {@code full} in the model's memory. */
    public void placeFromDevice(MemorySegment full) {
        place(full, true);
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
    public void parametersChanged() {
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
        for (int unit = layout.units().size() - 1; unit >= 0; unit--) { // GPT-2: the final LayerNorm, the embeddings
            if (!layout.ownsSlot(unit)) {
                continue;
            }
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
     * gathering the model.
     */
    public void gatherParameters(MemorySegment full) {
        gatherParameters(full, false);
    }

    /** {@link #gatherParameters(MemorySegment)} into {@code full} in the model's memory if {@code onDevice}. */
    public void gatherParameters(MemorySegment full, boolean onDevice) {
        if (whole != null) {
            if (full != null) {
                out(whole, full.asSlice(0, layout.fp32Bytes()), onDevice);
            }
            return;
        }
        for (Unit u : layout.units()) {
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

    /**
     * Collective: {@code whole} (Ψ fp32 in the model's memory) receives every rank's {@code shard} (a vector laid out
     * as this rank's shard, e.g. an optimizer's moment) at its places of the flat layout, unit by unit through a
     * temporary of the largest unit. Between steps.
     */
    public void gatherShardVector(MemorySegment shard, MemorySegment whole) {
        long most = 0;
        for (Unit u : layout.units()) {
            most = Math.max(most, u.count());
        }
        try (DeviceArena tmp = memory.arena()) {
            MemorySegment buf = tmp.allocate(Math.max(1, most) * Float.BYTES);
            for (Unit u : layout.units()) {
                comm.allGather(shardOf(shard, u.index()), buf.asSlice(0, u.count() * Float.BYTES), u.count(),
                        DType.FP32);
                for (Segment s : u.segments()) {
                    long bytes = s.count() * Float.BYTES;
                    memory.copy(buf.asSlice(s.packed() * Float.BYTES, bytes), whole.asSlice(s.offset() * Float.BYTES,
                            bytes));
                }
            }
        }
    }

    /** This rank's pieces of the whole vector {@code full} (host memory) into {@code shard} (laid out as its shard). */
    public void takeShard(MemorySegment full, MemorySegment shard) {
        for (UnitShards.Piece p : shards.pieces()) {
            long bytes = p.length() * Float.BYTES;
            memory.copyToDevice(full.asSlice(p.flat() * Float.BYTES, bytes), shard.asSlice(p.shard() * Float.BYTES,
                    bytes));
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
    public void gatherUpdated() {
        finishGradients();
        for (UnitShards.Piece p : shards.pieces()) {
            long bytes = p.length() * Float.BYTES;
            memory.copy(whole.asSlice(p.flat() * Float.BYTES, bytes), gradShard.asSlice(p.shard() * Float.BYTES,
                    bytes));
        }
        for (Unit u : layout.units()) {
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
        return slots[layout.units().get(unit).slot()];
    }

    private MemorySegment shardOf(MemorySegment shard, int unit) {
        return shard.asSlice(shards.shardOffset(unit) * Float.BYTES, shards.chunkLength(unit) * Float.BYTES);
    }

    /**
     * Tensor {@code t}'s parameters: at stage 2 its place in the whole vector, at stage 3 its slice of its unit's
     * gathered buffer (between the unit's {@link #acquire} and {@link #release}).
     */
    public MemorySegment param(UnitLayout.Place t) {
        if (whole != null) {
            return whole.asSlice(t.offset() * Float.BYTES, t.count() * Float.BYTES);
        }
        return slice(params, "parameters", t, true);
    }

    /** Tensor {@code t}'s gradient: its slice of its unit's gradient buffer (between the gradient brackets). */
    public MemorySegment grad(UnitLayout.Place t) {
        return slice(grads, "gradients", t, false);
    }

    private MemorySegment slice(Slot[] slots, String what, UnitLayout.Place t, boolean needsUse) {
        Slot s = slot(slots, t.unit());
        if (s.unit != t.unit() || needsUse && !s.inUse) {
            throw new IllegalStateException(what + " of " + t.name() + " (unit " + t.unit() + ") read outside "
                    + (needsUse ? "acquire/release" : "beginGradients/gradientsDone"));
        }
        return s.buf.asSlice(t.packed() * Float.BYTES, t.count() * Float.BYTES);
    }

    /** Unit {@code unit}'s parameters are about to be read (stage 3: gathered unless still there). Collective. */
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

    /** A hint: {@code unit} is acquired next (stage 3: its gather starts when its slot is free). */
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

    /** Unit {@code unit}'s parameters are not read again until the next {@link #acquire}. */
    public void release(int unit) {
        if (params != null) {
            slot(params, unit).inUse = false;
        }
    }

    /** A new accumulation of gradients starts. */
    public void zeroGrad() {
        for (Slot g : grads) {
            g.await();
            g.unreduced = false; // an accumulation never finished is dropped
            g.unit = -1;
        }
        java.util.Arrays.fill(inShard, false);
    }

    /** This backward is about to add its first gradient into unit {@code unit}'s. */
    public void beginGradients(int unit) {
        Slot g = slot(grads, unit);
        g.await();
        if (!(g.unreduced && g.unit == unit)) { // an own buffer keeps accumulating over the step's micro-batches
            memory.zero(g.buf.asSlice(0, shards.count(unit) * Float.BYTES));
        }
        g.unit = unit;
    }

    /** This backward has finished unit {@code unit}'s gradients (a chained unit's reduce-scatter starts). */
    public void gradientsDone(int unit) {
        Slot g = slot(grads, unit);
        long n = shards.count(unit), mine = shards.chunkLength(unit);
        MemorySegment send = g.buf.asSlice(0, n * Float.BYTES), target = shardOf(gradShard, unit);
        if (layout.ownsSlot(unit)) {
            g.unreduced = true; // reduce-scattered once per step, by finishGradients
            return;
        }
        if (!inShard[unit]) {
            g.pending = comm.reduceScatterAsync(send, target, n, DType.FP32, ReduceOp.AVG);
            inShard[unit] = true;
        } else {
            MemorySegment sum = scratch;
            int o = layout.otherChainSlot(unit); // the other chained slot (none when the chain has one unit)
            Slot other = o < 0 ? g : grads[o];
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
    public long workingBytes() {
        return bytes() - gradShard.byteSize() - (paramShard != null ? paramShard.byteSize() : whole.byteSize());
    }

    /** Bytes these buffers allocated. */
    public long bytes() {
        long b = gradShard.byteSize() + (paramShard != null ? paramShard.byteSize() : whole.byteSize())
                + (scratch != null ? scratch.byteSize() : 0);
        for (Slot[] slots : new Slot[][] {params, grads}) {
            for (int i = 0; slots != null && i < slots.length; i++) {
                b += slots[i].buf.byteSize();
            }
        }
        return b;
    }

    /** Frees the memory; closing twice does nothing. */
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
