package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;

/**
 * ZeRO data parallelism (Rajbhandari et al. 2020) stages 2 and 3 for one rank of a {@code Trainer} (stage 1 is
 * {@link SyncStates}': the Java API's {@code ZeroSharding}): the model states are sharded over the N ranks, each unit
 * of the model cut as {@link Chunks} splits it ({@link UnitShards}) — lengths differing by at most one, so no padding
 * is needed.
 * <ul>
 *   <li><b>Stage 2</b>: also the gradients, and the model's full gradient buffer is gone: the model's weights become
 *       {@link ShardedWeights} (whole parameters), whose backward writes each unit's gradients (embeddings, each layer,
 *       final LayerNorm) into a working buffer and reduce-scatters it ({@code AVG}) into the rank's gradient shard
 *       right after the unit's backward, overlapping the next unit's. AdamW updates the rank's runs of the whole
 *       parameter vector, which are then all-gathered unit by unit. --bucket-mb applies to stages 0 and 1.</li>
 *   <li><b>Stage 3</b>: also the parameters, and the model's full buffers are gone: the model's weights become
 *       {@link ShardedWeights} with sharded parameters, which keep only the rank's shard of the parameters and of the
 *       averaged gradients, gather each unit just before its use in forward and again in backward into working
 *       buffers, and reduce-scatter its gradients as at stage 2. From stage 2 the shards are split unit by unit
 *       ({@link UnitShards}), not as one cut of the flat vector: a rank's shard is its chunk of every unit, and AdamW
 *       walks it as runs of the flat layout ({@link UnitShards#pieces()}). Nothing is
 *       gathered after the update: the next forward does it. Validation and sampling run the sharded model (a
 *       collective: every rank runs them); checkpoints gather the whole parameter vector into a temporary on rank 0
 *       ({@link #gatherParameters}).</li>
 * </ul>
 * Both stages compute the same numbers as plain DDP, bit for bit without clipping with 2 ranks and one micro-batch
 * per step:
 * the in-process ring's reduce-scatter sums each element in the same order as its all-reduce of the whole buffer
 * (DDP with {@code bucketBytes} 0; with 2 ranks any order, as a + b = b + a; MPI's reductions promise no order),
 * AdamW's result does not depend on how the range
 * is cut (its offset names the element), and the gathers move bytes. The gradient norm for clipping is the norm of
 * the full averaged gradient: each rank's float64 sum of squares over its
 * shard is exchanged bit for bit (an {@code allGather} of the 8 bytes, not an fp32 reduction, which would round them)
 * and summed in rank order, so every rank gets the same float64 and the replicas stay identical; it equals DDP's
 * within the kernel's rounding ({@link #sumOfSquares}). Stage 2 and 3's per-unit reduce-scatter cuts a unit where the
 * whole-buffer one cuts the vector, and the ring starts each chunk's sum at the rank after the chunk's owner: with 3 or
 * more ranks an element's N terms are added in another order (a rounding of the fp32 sum, ~1 ulp); with several
 * micro-batches the sum over micro-batches of the ranks' averages replaces the average of the ranks' sums.
 *
 * <p>Checkpoints stay whole: {@link #gatherMoments} brings the shards of m and v to rank 0, which writes the plain
 * {@link TrainState}; {@link #readMoments} reads each rank's shard back — so a checkpoint of any stage resumes at any
 * other (and without ZeRO). One step at a time, on the rank's own thread; every rank calls the same methods in the same order.
 *
 * <p><b>Memory.</b> The moments, like {@link ShardedWeights}' buffers, live in the model's memory
 * ({@link Gpt2#memory()}), and the host reaches them and the parameters only through its copies, so every stage runs
 * unchanged on a device with a communicator that takes device buffers (NCCL); the norm's partial sums and the
 * overflow flags cross through a {@link ValueExchange}.
 */
final class ZeroOptimizer implements AutoCloseable {

    /** The highest stage. */
    static final int MAX_STAGE = ZeroMemory.MAX_STAGE;

    private final int stage;
    private final Communicator comm;
    private final Gpt2 model;
    private final Ops ops;
    private final long count;
    /** Elements in this rank's shard. */
    private final long length;
    /** This rank's shard, as runs of the flat layout: one below stage 3. */
    private final List<UnitShards.Piece> pieces;
    /**
     * AdamW's ranges over the shard buffers: the pieces cut where weight decay starts or stops, each at its shard
     * index ({@code start}) and its index in the whole vector ({@code offset}, the stochastic-rounding stream).
     */
    private final List<AdamWRange> ranges;
    /**
     * {@link #ranges} split by piece, each {@code start} counted from its piece's first element: for the stages whose
     * parameters are not sharded, where a piece sits at one place in the shard buffers and at another in the whole.
     */
    private final List<List<AdamWRange>> rangesByPiece;
    /** Stage ≥ 2: the model's weights, holding this rank's shards; null below. */
    private final ShardedWeights sharded;
    /** The model's memory, and the arena of the moment shards in it. */
    private final DeviceMemory memory;
    private final DeviceArena arena;
    private final MemorySegment m;
    private final MemorySegment v;
    /** Stage ≥ 2: this rank's averaged gradients (the sharded weights'); null below. */
    private final MemorySegment gradShard;
    /** Stage 3: the parameters this rank owns (the sharded weights'); null below. */
    private final MemorySegment paramShard;

    /** {@code length} elements at {@code flat} of the layout, at {@code shard} of this rank's shard. */
    /** The norm's partial sums (N float64) and the overflow flags, across the ranks. */
    private final ValueExchange exchange;

    /**
     * Stage {@code stage} (1..3) for {@code model} (its parameters already the same on every rank) on {@code comm}'s
     * ranks, AdamW's weight decay applied as {@code cfg} says. From stage 2 the model's flat weights are replaced by
     * {@link ShardedWeights} (and freed); {@link #close} does not give them back.
     */
    ZeroOptimizer(int stage, Communicator comm, Gpt2 model, TrainConfig cfg) {
        if (stage < 2 || stage > MAX_STAGE) {
            throw new IllegalArgumentException("stage must be 2 or 3 (stage 1 is SyncStates'), got " + stage);
        }
        this.stage = stage;
        this.comm = comm;
        this.model = model;
        this.ops = model.ops();
        this.count = model.layout().count();
        int n = comm.size(), r = comm.rank();
        this.pieces = piecesOf(r);
        this.length = pieces.stream().mapToLong(UnitShards.Piece::length).sum();
        List<DecayRanges.Range> decay = DecayRanges.of(model.layout(), cfg);
        List<List<AdamWRange>> byPiece = new java.util.ArrayList<>();
        List<AdamWRange> all = new java.util.ArrayList<>();
        for (UnitShards.Piece p : pieces) {
            List<AdamWRange> rs = new java.util.ArrayList<>();
            for (DecayRanges.Range d : DecayRanges.clip(decay, p.flat(), p.flat() + p.length())) {
                long inPiece = d.offset() - p.flat();
                rs.add(new AdamWRange(inPiece, d.offset(), d.length(), d.decays()));
                all.add(new AdamWRange(p.shard() + inPiece, d.offset(), d.length(), d.decays()));
            }
            byPiece.add(List.copyOf(rs));
        }
        this.rangesByPiece = List.copyOf(byPiece);
        this.ranges = List.copyOf(all);
        long bytes = length * Float.BYTES;
        this.memory = model.memory();
        this.arena = memory.arena();
        ValueExchange x = null;
        try {
            this.m = arena.allocate(bytes);
            this.v = arena.allocate(bytes);
            x = new ValueExchange(comm, memory, 2 * n);
            this.exchange = x;
            this.sharded = new ShardedWeights(model.layout(), comm, ops, model.params(), stage >= 3);
            model.useWeights(sharded);
            this.gradShard = sharded.gradShard();
            this.paramShard = sharded.paramShard();
        } catch (RuntimeException | Error e) {
            if (x != null) {
                x.close();
            }
            arena.close();
            throw e;
        }
    }

    /** Rank {@code q}'s shard as runs of the flat layout: its chunk of every unit. */
    private List<UnitShards.Piece> piecesOf(int q) {
        return new UnitShards(model.layout(), comm.size(), q).pieces();
    }

    /**
     * Bytes this optimizer allocated: m, v and the norm partials. (From stage 2 the gradient shard, and at stage 3
     * the parameter shard, belong to the model's {@link ShardedWeights}.)
     */
    long stateBytes() {
        return m.byteSize() + v.byteSize() + (long) comm.size() * Double.BYTES; // the exchange's N partials
    }

    /** Bytes of AdamW's m and v shards. */
    long momentBytes() {
        return m.byteSize() + v.byteSize();
    }

    /** Bytes of the working buffers. */
    long workingBytes() {
        return sharded.workingBytes();
    }

    /** The stage. */
    int stage() {
        return stage;
    }

    /** The model-state accounting of this stage and rank count. */
    ZeroMemory memory() {
        return ZeroMemory.fp32(stage, comm.size(), count);
    }

    /** Whether the model's parameters are sharded (stage 3): no rank holds them whole. */
    boolean shardsParameters() {
        return sharded.shardsParameters();
    }

    /**
     * Sets the parameters to {@code full} (Ψ fp32, the same on every rank; e.g. a checkpoint's): the whole vector at
     * stage 2, this rank's shard at stage 3.
     */
    void setParameters(MemorySegment full) {
        sharded.setParameters(full);
    }

    /**
     * Collective: rank passing {@code full} (Ψ fp32) receive the whole parameter vector there; the others pass null.
     * At stage 3 every unit is gathered in turn; at stage 2 every rank has them and this only copies.
     */
    void gatherParameters(MemorySegment full) {
        gatherParameters(full, false);
    }

    /** {@link #gatherParameters(MemorySegment)} into {@code full} in the model's memory if {@code onDevice}. */
    void gatherParameters(MemorySegment full, boolean onDevice) {
        sharded.gatherParameters(full, onDevice);
    }

    /**
     * After backward: this rank's shard ← the ranks' average of it. The model's backward started one
     * {@code reduceScatter(AVG)} per unit; this waits for them.
     */
    void reduceGradients() {
        sharded.finishGradients();
    }

    /**
     * {@code Σ g[i]²} over the whole averaged gradient, the same float64 on every rank: each rank's
     * {@code ops.sumOfSquares} over its shard,
     * exchanged as exact float64 bits and added in rank order. That is the same sum grouped differently: the kernel
     * accumulates short runs of squares in fp32 lanes whose grouping follows the buffer's start, so the result differs
     * from DDP's whole-buffer sum within the kernel's error bound (35·2⁻²⁴ relative, ~1e-8 in practice), and the
     * clipping factor {@code (float) (clip/√sum)} can differ from DDP's by an ulp when clipping is active; without
     * clipping the norm only reports.
     */
    double sumOfSquares() {
        double sum = 0;
        for (double partial : exchange.allGather(ops.sumOfSquares(gradShard, length))) { // in rank order
            sum += partial;
        }
        return sum;
    }

    /**
     * Whether any element of the averaged gradient is NaN or ±inf (a loss-scaling overflow), the same answer on every
     * rank: each rank checks its shard and the flags are combined by an {@code allReduce(MAX)}: a rank must not decide
     * to skip a step alone.
     */
    boolean hasNonFinite() {
        return exchange.any(ops.hasNonFinite(gradShard, length));
    }

    /**
     * AdamW step {@code t} on this rank's shard ({@code decay}'s weight decay for the decaying ranges, none for the
     * others), gradients multiplied by {@code gradScale}, in multi-range calls: one at stage 3 (one launch on a GPU),
     * one per piece at stage 2, whose parameters stay whole. Then, at stage 2, the model's parameter vector is gathered
     * from every rank's updated runs, so it holds the updated parameters on every rank. At stage 3 the next use of
     * each unit gathers it.
     */
    void update(AdamWConfig decay, int t, float gradScale) {
        if (paramShard != null) {
            ops.adamw(paramShard, gradShard, m, v, ranges, decay, t, gradScale);
        } else {
            for (int i = 0; i < pieces.size(); i++) {
                UnitShards.Piece piece = pieces.get(i);
                long flat = piece.flat() * Float.BYTES, shard = piece.shard() * Float.BYTES;
                ops.adamw(model.params().asSlice(flat), gradShard.asSlice(shard), m.asSlice(shard), v.asSlice(shard),
                        rangesByPiece.get(i), decay, t, gradScale);
            }
        }
        if (shardsParameters()) {
            sharded.parametersChanged();
        } else {
            sharded.gatherUpdated();
        }
    }

    /**
     * Collective: rank 0 receives every rank's shard of m and v into {@code fullM}, {@code fullV} (Ψ fp32 each, the
     * flat layout); the other ranks send theirs and pass null. Rank 0 receives each shard into a temporary of the
     * largest shard's size first.
     */
    void gatherMoments(MemorySegment fullM, MemorySegment fullV) {
        int n = comm.size();
        if (comm.rank() != 0) {
            if (length > 0) {
                comm.send(m, length, DType.FP32, 0);
                comm.send(v, length, DType.FP32, 0);
            }
            return;
        }
        unpack(pieces, m, fullM);
        unpack(pieces, v, fullV);
        try (DeviceArena tmp = memory.arena()) { // received where the communicator takes buffers
            for (int q = 1; q < n; q++) {
                List<UnitShards.Piece> theirs = piecesOf(q);
                long len = theirs.stream().mapToLong(UnitShards.Piece::length).sum();
                if (len == 0) {
                    continue;
                }
                MemorySegment buf = tmp.allocate(len * Float.BYTES);
                for (MemorySegment full : new MemorySegment[] {fullM, fullV}) {
                    comm.recv(buf, len, DType.FP32, q);
                    unpack(theirs, buf, full);
                }
            }
        }
    }

    /** Copies a shard (model memory) laid out as {@code pieces} into its places of the flat host {@code full}. */
    private void unpack(List<UnitShards.Piece> pieces, MemorySegment shard, MemorySegment full) {
        for (UnitShards.Piece p : pieces) {
            long bytes = p.length() * Float.BYTES;
            memory.copyToHost(shard.asSlice(p.shard() * Float.BYTES, bytes), full.asSlice(p.flat() * Float.BYTES,
                    bytes));
        }
    }

    /** Reads this rank's shard of m and v from the whole-model state file {@code file}; returns its header. */
    TrainState.Header readMoments(Path file) throws IOException {
        TrainState.Header h = null;
        try (Arena staging = Arena.ofConfined()) {
            for (UnitShards.Piece p : pieces) {
                long at = p.shard() * Float.BYTES, bytes = p.length() * Float.BYTES;
                MemorySegment dm = m.asSlice(at, bytes), dv = v.asSlice(at, bytes);
                MemorySegment hm = memory.writableOnHost(dm, staging), hv = memory.writableOnHost(dv, staging);
                h = TrainState.read(file, model.config(), hm, hv, p.flat(), p.length());
                memory.writeBack(hm, dm);
                memory.writeBack(hv, dv);
            }
        }
        return h != null ? h : TrainState.read(file, model.config(), MemorySegment.NULL, MemorySegment.NULL, 0, 0);
    }

    @Override
    public void close() {
        try {
            exchange.close();
        } finally {
            arena.close();
        }
    }
}
