package io.accel4j.nn;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The whole model behind a tensor-parallel network: its parameter table as one rank would hold it (the same names
 * and order, every split tensor whole: {@link #whole()}), and the moves between this rank's flat buffer (its shards
 * and the whole replicated tensors) and a whole flat buffer, on the host: {@link #extract} (a whole checkpoint or
 * initialisation into this rank's), {@link #place} (this rank's shards into their places), {@link #gather} (every
 * rank's, over the tensor group: a whole checkpoint written by any layout). For a network that is not split the
 * whole table is its own and the moves are copies.
 */
public final class TensorShards {

    private final ParameterTable local;
    private final ParameterTable whole;
    private final TensorParallel tensor;
    private final java.util.function.Function<String, Sharding> sharding;

    private TensorShards(ParameterTable local, TensorParallel tensor,
                         java.util.function.Function<String, Sharding> sharding, ParameterTable.Order order) {
        this.local = local;
        this.tensor = tensor;
        this.sharding = sharding;
        int T = tensor.size();
        List<Builder.ParamDecl> decls = new ArrayList<>();
        for (ParameterTable.Entry e : local.entries()) {
            long[] dims = sharding.apply(e.name()).whole(e.dims(), T);
            long count = 1;
            for (long d : dims) {
                count *= d;
            }
            decls.add(new Builder.ParamDecl(e.name(), dims, e.decays(), e.lrScale(), e.init(), count));
        }
        this.whole = new ParameterTable(decls, order);
    }

    /** The shards of {@code net}. */
    public static TensorShards of(Network net) {
        return new TensorShards(net.table(), net.tensor(), net::sharding, net.order());
    }

    /** The shards of a pipeline stage {@code net} (its whole table: the stage's layers unsplit). */
    public static TensorShards of(StageNetwork net) {
        return new TensorShards(net.table(), net.tensor(), net::sharding, net.order());
    }

    /** The whole model's table (the one-rank network's). */
    public ParameterTable whole() {
        return whole;
    }

    /** {@code shard} (this rank's {@code local().count()} fp32, host) from the whole buffer {@code all} (host). */
    public void extract(MemorySegment all, MemorySegment shard) {
        move(all, shard, tensor.rank(), true);
    }

    /** This rank's shards {@code shard} into their places in the whole buffer {@code all} (replicated: copied). */
    public void place(MemorySegment shard, MemorySegment all) {
        move(all, shard, tensor.rank(), false);
    }

    /**
     * Every rank's {@code shard} (host, this rank's flat buffer's layout) into {@code all} (host, the whole table's),
     * on every rank of the tensor group: a collective of it (an all-gather of the flat shards).
     */
    public void gather(MemorySegment shard, MemorySegment all) {
        int T = tensor.size();
        if (T == 1) {
            place(shard, all);
            return;
        }
        Communicator comm = tensor.communicator();
        long n = local.count();
        try (Arena a = Arena.ofShared()) {
            MemorySegment every = a.allocate(n * T * Float.BYTES, 64);
            MemorySegment mine = every.asSlice(n * comm.rank() * Float.BYTES, n * Float.BYTES);
            MemorySegment.copy(shard, 0, mine, 0, n * Float.BYTES);
            comm.allGather(mine, every, n * T, DType.FP32);
            for (int q = 0; q < T; q++) {
                move(all, every.asSlice(n * q * Float.BYTES, n * Float.BYTES), q, false);
            }
        }
    }

    private void move(MemorySegment all, MemorySegment shard, int rank, boolean toShard) {
        int T = tensor.size();
        for (ParameterTable.Entry e : local.entries()) {
            ParameterTable.Entry w = whole.entry(e.name());
            MemorySegment s = shard.asSlice(e.offset() * Float.BYTES, e.count() * Float.BYTES);
            MemorySegment x = all.asSlice(w.offset() * Float.BYTES, w.count() * Float.BYTES);
            Sharding sh = sharding.apply(e.name());
            if (toShard) {
                sh.extract(x, s, e.dims(), rank, T);
            } else {
                sh.place(s, x, e.dims(), rank, T);
            }
        }
    }
}
