package io.accel4j.fit;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;

/**
 * ZeRO (Rajbhandari et al. 2020) stages 1 and 2 for any network: rank r's shard is chunk r of the flat parameter
 * vector as {@link Chunks} splits it (the split reduce-scatter and all-gather use, no padding), and its optimizer
 * holds state for that shard only.
 * <ul>
 *   <li><b>Stage 1</b>: the gradients are all-reduced as in DDP; each rank updates its shard of the parameters and an
 *       in-place all-gather hands every rank the others'. Bit for bit DDP: the optimizer's result does not depend on
 *       how the vector is cut (each range names its elements by their offset), and the gather moves bytes.</li>
 *   <li><b>Stage 2</b>: the gradients are reduce-scattered ({@code AVG}) into a buffer of the shard's length, which
 *       the optimizer reads; the global norm is the sum of the ranks' float64 shard sums, exchanged bit for bit and
 *       added in rank order (so every rank clips alike; it differs from DDP's by the rounding of that sum). The
 *       network's full gradient buffer stays: backward writes it whole before the reduce-scatter.</li>
 * </ul>
 */
public final class ZeroSharding extends DataParallel {

    private final int stage;
    private final DeviceArena arena;
    private final MemorySegment gradShard; // stage 2; null at stage 1

    /**
     * ZeRO stage {@code stage} (1 or 2) over {@code comm} for a vector of {@code count} parameters in {@code memory}
     * ({@code values}: as {@link DataParallel#DataParallel(Communicator, DeviceMemory, int)}).
     *
     * @throws IllegalArgumentException for another stage, or a communicator of one rank
     */
    public ZeroSharding(int stage, Communicator comm, DeviceMemory memory, long count, int values) {
        super(comm, memory, values);
        if (stage != 1 && stage != 2) {
            close();
            throw new IllegalArgumentException("ZeRO sharding here is stage 1 or 2 (stage 3, "
                    + "parameters sharded too, is UnitSharding), got " + stage);
        }
        if (comm.size() < 2) {
            close();
            throw new IllegalArgumentException("ZeRO shards over the ranks: it needs more than one rank");
        }
        this.stage = stage;
        this.arena = memory.arena();
        this.gradShard = stage == 2
                ? arena.allocate(Math.max(1, Chunks.length(count, comm.size(), comm.rank())) * Float.BYTES) : null;
    }

    @Override
    public Shard shard(long n) {
        int N = comm.size(), r = comm.rank();
        return new Shard(Chunks.start(n, N, r), Chunks.length(n, N, r));
    }

    @Override
    public void reduce(MemorySegment grads, long n) {
        if (stage == 1) {
            super.reduce(grads, n);
        } else {
            comm.reduceScatter(grads, gradShard, n, DType.FP32, ReduceOp.AVG);
        }
    }

    @Override
    public MemorySegment gradients(MemorySegment grads, long n) {
        return stage == 1 ? super.gradients(grads, n) : gradShard.asSlice(0, shard(n).length() * Float.BYTES);
    }

    @Override
    public double sumOfSquares(Ops ops, MemorySegment grads, long n) {
        if (stage == 1) {
            return super.sumOfSquares(ops, grads, n);
        }
        double mine = ops.sumOfSquares(gradShard, shard(n).length());
        double sum = 0;
        for (double d : values.allGather(mine)) { // bit for bit, summed in rank order: the same on every rank
            sum += d;
        }
        return sum;
    }

    @Override
    public boolean anyNonFinite(Ops ops, MemorySegment grads, long n) {
        return stage == 1 ? super.anyNonFinite(ops, grads, n) : any(ops.hasNonFinite(gradShard, shard(n).length()));
    }

    @Override
    public void afterUpdate(MemorySegment params, long n) {
        Shard s = shard(n);
        comm.allGather(params.asSlice(s.offset() * Float.BYTES, s.length() * Float.BYTES), params, n, DType.FP32);
    }

    @Override
    public void gatherShards(MemorySegment shard, MemorySegment whole, long n, DeviceMemory memory) {
        Shard s = shard(n);
        MemorySegment mine = whole.asSlice(s.offset() * Float.BYTES, s.length() * Float.BYTES);
        memory.copy(shard.asSlice(0, s.length() * Float.BYTES), mine);
        comm.allGather(mine, whole, n, DType.FP32); // in place: this rank's chunk is already there
    }

    /** Bytes this strategy allocated: the gradient shard at stage 2. */
    public long bytes() {
        return gradShard == null ? 0 : gradShard.byteSize();
    }

    @Override
    public void close() {
        if (arena != null) {
            arena.close();
        }
        super.close();
    }

    /** The stage. */
    public int stage() {
        return stage;
    }
}
