package io.accel4j.train;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

/**
 * ZeRO data parallelism (Rajbhandari et al. 2020) for one rank of a {@link Trainer}: the model states are sharded
 * over the N ranks. Rank r's shard is chunk r of the flat parameter vector as {@link Chunks} splits it,
 * {@code [⌊r·Ψ/N⌋, ⌊(r+1)·Ψ/N⌋)} — contiguous, lengths differing by at most one when N does not divide Ψ (possibly
 * empty when Ψ &lt; N) — the split {@link Communicator#reduceScatter} and {@link Communicator#allGather} use, so no
 * padding is needed.
 * <ul>
 *   <li><b>Stage 1</b>: AdamW's m and v only for the shard. The gradients are all-reduced as in plain DDP (with the
 *       trainer's {@link GradientBuckets} overlap), AdamW updates the shard's parameters in the model's buffer, and an
 *       in-place {@code allGather} gives every rank the others' updated shards.</li>
 *   <li><b>Stage 2</b>: also the gradients: one {@code reduceScatter(AVG)} of the model's gradient buffer after
 *       backward leaves this rank only its shard's average, which AdamW reads. (The model's full gradient buffer is
 *       still allocated, as backward writes every gradient on the CPU; the reduce-scatter is not bucketed, so it does
 *       not overlap backward: --bucket-mb applies to stages 0 and 1.)</li>
 *   <li><b>Stage 3</b>: also the parameters: the rank owns its shard of the parameters persistently and AdamW updates
 *       only that; the model's parameter buffer is a working copy, filled by an out-of-place {@code allGather} of the
 *       owned shards. This is the un-overlapped form: the gather of the next step's forward/backward parameters is
 *       issued right after the update, for the whole model (so between steps the working copy holds the current
 *       parameters for validation, checkpoints and sampling), not per layer before each use.</li>
 * </ul>
 * Every stage computes the same numbers as plain DDP, bit for bit at stage 1 and, without clipping, at every stage:
 * the in-process ring's reduce-scatter sums each element in the same order as its all-reduce of the whole buffer
 * (DDP with {@code bucketBytes} 0; with 2 ranks any order, as a + b = b + a; MPI's reductions promise no order),
 * AdamW's result does not depend on how the range
 * is cut (its offset names the element), and the gathers move bytes. The gradient norm for clipping is the norm of
 * the full averaged gradient: at stage 1 every rank has it; from stage 2 each rank's float64 sum of squares over its
 * shard is exchanged bit for bit (an {@code allGather} of the 8 bytes, not an fp32 reduction, which would round them)
 * and summed in rank order, so every rank gets the same float64 and the replicas stay identical; it equals DDP's
 * within the kernel's rounding ({@link #sumOfSquares}).
 *
 * <p>Checkpoints stay whole: {@link #gatherMoments} brings the shards of m and v to rank 0, which writes the plain
 * {@link TrainState}; {@link #readMoments} reads each rank's shard back — so a checkpoint of any stage resumes at any
 * other (and without ZeRO). One step at a time, on the rank's own thread; every rank calls the same methods in the same order.
 */
final class ZeroOptimizer implements AutoCloseable {

    /** The highest stage. */
    static final int MAX_STAGE = 3;

    private final int stage;
    private final Communicator comm;
    private final Gpt2 model;
    private final Ops ops;
    private final long count;
    /** This rank's shard: elements [lo, lo + length). */
    private final long lo;
    private final long length;
    private final List<DecayRanges.Range> runs;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment m;
    private final MemorySegment v;
    /** Stage ≥ 2: this rank's averaged gradients; null below. */
    private final MemorySegment gradShard;
    /** Stage 3: the parameters this rank owns; null below. */
    private final MemorySegment paramShard;
    /** N float64 slots (2 fp32 each) for the norm's exchange. */
    private final MemorySegment partials;

    /**
     * Stage {@code stage} (1..3) for {@code model} (its parameters already the same on every rank) on {@code comm}'s
     * ranks, AdamW's weight decay applied as {@code cfg} says.
     */
    ZeroOptimizer(int stage, Communicator comm, Gpt2 model, TrainConfig cfg) {
        if (stage < 1 || stage > MAX_STAGE) {
            throw new IllegalArgumentException("stage must be 1..3, got " + stage);
        }
        this.stage = stage;
        this.comm = comm;
        this.model = model;
        this.ops = model.ops();
        this.count = model.layout().count();
        int n = comm.size(), r = comm.rank();
        this.lo = Chunks.start(count, n, r);
        this.length = Chunks.length(count, n, r);
        this.runs = DecayRanges.clip(DecayRanges.of(model.layout(), cfg), lo, lo + length);
        long bytes = length * Float.BYTES;
        try {
            this.m = arena.allocate(bytes, 64);
            this.v = arena.allocate(bytes, 64);
            this.gradShard = stage >= 2 ? arena.allocate(bytes, 64) : null;
            this.paramShard = stage >= 3 ? arena.allocate(bytes, 64) : null;
            this.partials = arena.allocate((long) n * Double.BYTES, 64);
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
        parametersChanged();
    }

    /** Bytes this rank's shards take: m, v, the gradient and parameter shards by stage, the norm partials. */
    long stateBytes() {
        return m.byteSize() + v.byteSize() + (gradShard == null ? 0 : gradShard.byteSize())
                + (paramShard == null ? 0 : paramShard.byteSize()) + partials.byteSize();
    }

    /** The stage. */
    int stage() {
        return stage;
    }

    /** Whether the gradients are reduce-scattered ({@link #reduceGradients}) rather than all-reduced (stage 1). */
    boolean shardsGradients() {
        return stage >= 2;
    }

    /** The model-state accounting of this stage and rank count. */
    ZeroMemory memory() {
        return ZeroMemory.fp32(stage, comm.size(), count);
    }

    /**
     * The model's parameters were set from outside (construction, resume): stage 3 takes its owned shard from them.
     */
    void parametersChanged() {
        if (paramShard != null) {
            MemorySegment.copy(model.params(), lo * Float.BYTES, paramShard, 0, length * Float.BYTES);
        }
    }

    /** Stage ≥ 2, after backward: this rank's shard ← the ranks' average of it ({@code reduceScatter(AVG)}). */
    void reduceGradients() {
        if (gradShard == null) {
            throw new IllegalStateException("stage " + stage + " all-reduces the gradients; it does not shard them");
        }
        comm.reduceScatter(model.grads(), gradShard, count, DType.FP32, ReduceOp.AVG);
    }

    /**
     * {@code Σ g[i]²} over the whole averaged gradient, the same float64 on every rank. Stage 1: the model's buffer
     * holds all of it, so exactly DDP's sum. From stage 2: each rank's {@code ops.sumOfSquares} over its shard,
     * exchanged as exact float64 bits and added in rank order. That is the same sum grouped differently: the kernel
     * accumulates short runs of squares in fp32 lanes whose grouping follows the buffer's start, so the result differs
     * from DDP's whole-buffer sum within the kernel's error bound (35·2⁻²⁴ relative, ~1e-8 in practice), and the
     * clipping factor {@code (float) (clip/√sum)} can differ from DDP's by an ulp when clipping is active; without
     * clipping the norm only reports.
     */
    double sumOfSquares() {
        if (gradShard == null) {
            return ops.sumOfSquares(model.grads(), count);
        }
        int n = comm.size();
        double mine = ops.sumOfSquares(gradShard, length);
        MemorySegment slot = partials.asSlice((long) comm.rank() * Double.BYTES, Double.BYTES);
        slot.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, 0, mine);
        comm.allGather(slot, partials, 2L * n, DType.FP32); // moves bytes: chunk r of 2N floats is slot r
        double sum = 0;
        for (int r = 0; r < n; r++) {
            sum += partials.get(ValueLayout.JAVA_DOUBLE_UNALIGNED, (long) r * Double.BYTES);
        }
        return sum;
    }

    /**
     * Whether any element of the averaged gradient is NaN or ±inf (a loss-scaling overflow), the same answer on every
     * rank. Stage 1: the model's buffer holds all of it. From stage 2 each rank checks its shard and the flags are
     * combined by an {@code allReduce(MAX)}: a rank must not decide to skip a step alone.
     */
    boolean hasNonFinite() {
        if (gradShard == null) {
            return ops.hasNonFinite(model.grads(), count);
        }
        MemorySegment flag = partials.asSlice(0, Float.BYTES);
        flag.set(ValueLayout.JAVA_FLOAT_UNALIGNED, 0, ops.hasNonFinite(gradShard, length) ? 1f : 0f);
        comm.allReduce(flag, 1, DType.FP32, ReduceOp.MAX);
        return flag.get(ValueLayout.JAVA_FLOAT_UNALIGNED, 0) > 0;
    }

    /**
     * AdamW step {@code t} on this rank's shard ({@code decay} for the decaying runs, {@code none} for the others),
     * gradients multiplied by {@code gradScale}; then the model's parameter buffer is gathered from every rank's
     * updated shard, so it holds the updated parameters on every rank.
     */
    void update(AdamWConfig decay, AdamWConfig none, int t, float gradScale) {
        for (DecayRanges.Range r : runs) {
            long shardAt = (r.offset() - lo) * Float.BYTES, at = r.offset() * Float.BYTES;
            long bytes = r.length() * Float.BYTES;
            MemorySegment p = paramShard != null ? paramShard.asSlice(shardAt, bytes)
                    : model.params().asSlice(at, bytes);
            MemorySegment g = gradShard != null ? gradShard.asSlice(shardAt, bytes)
                    : model.grads().asSlice(at, bytes);
            ops.adamw(p, g, m.asSlice(shardAt, bytes), v.asSlice(shardAt, bytes), r.offset(), r.length(),
                    r.decays() ? decay : none, t, gradScale);
        }
        MemorySegment mine = paramShard != null ? paramShard
                : model.params().asSlice(lo * Float.BYTES, length * Float.BYTES); // in place
        comm.allGather(mine, model.params(), count, DType.FP32);
    }

    /**
     * Collective: rank 0 receives every rank's shard of m and v into {@code fullM}, {@code fullV} (Ψ fp32 each);
     * the other ranks send theirs and pass null.
     */
    void gatherMoments(MemorySegment fullM, MemorySegment fullV) {
        int n = comm.size();
        for (MemorySegment[] pair : new MemorySegment[][] {{m, fullM}, {v, fullV}}) {
            if (comm.rank() == 0) {
                MemorySegment.copy(pair[0], 0, pair[1], lo * Float.BYTES, length * Float.BYTES);
                for (int q = 1; q < n; q++) {
                    long len = Chunks.length(count, n, q);
                    if (len > 0) {
                        comm.recv(pair[1].asSlice(Chunks.start(count, n, q) * Float.BYTES, len * Float.BYTES), len,
                                DType.FP32, q);
                    }
                }
            } else if (length > 0) {
                comm.send(pair[0], length, DType.FP32, 0);
            }
        }
    }

    /** Reads this rank's shard of m and v from the whole-model state file {@code file}; returns its header. */
    TrainState.Header readMoments(Path file) throws IOException {
        return TrainState.read(file, model.config(), m, v, lo, length);
    }

    @Override
    public void close() {
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
