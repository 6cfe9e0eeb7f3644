package io.accel4j.fit;

import io.accel4j.nn.Network;
import io.accel4j.train.parallel.ZeroMemory;
import java.lang.foreign.MemorySegment;

/**
 * What one rank of a {@link Learner} allocated for its model states, counted as {@code accel4j train} prints them
 * (the start-up memory lines (the model's bytes and activations, {@link ZeroMemory#describe(long, long)})
 * with the same values: the parameters
 * and gradients (the network's flat buffers, or ZeRO-2/3's sharded units with their working buffers; ZeRO-2's
 * gradient shard over the whole vector), and the optimizer's state (its shard under ZeRO).
 */
final class RankMemory {

    private RankMemory() {
    }

    /** Bytes of {@code r}'s parameters, gradients and optimizer state, as allocated. */
    static long modelStateBytes(RankStep r) {
        return weightBytes(r) + optimizerBytes(r);
    }

    /**
     * Bytes {@code r}'s model allocated: its parameters and gradients (as {@link #modelStateBytes} counts them) and
     * its activations; the trainer's {@code Gpt2.totalBytes}.
     */
    static long modelBytes(RankStep r) {
        return weightBytes(r) + r.network().activationBytes();
    }

    /** Bytes of ZeRO-2/3's working buffers for the units in use, within {@link #modelStateBytes} (else 0). */
    static long workingBytes(RankStep r) {
        return r.sync() instanceof UnitSharding u ? u.workingBytes() : 0;
    }

    /** The ZeRO paper's fp32 accounting for {@code stage} over {@code ranks} ranks of {@code count} parameters. */
    static ZeroMemory accounting(int stage, int ranks, long count) {
        return ZeroMemory.fp32(ranks > 1 ? stage : 0, ranks, count);
    }

    private static long weightBytes(RankStep r) {
        if (r.sync() instanceof UnitSharding u) { // the units' shards (or whole vector), working buffers included
            return u.bytes();
        }
        Network n = r.network();
        long flat = n.totalBytes() - n.activationBytes(); // parameters and gradients, 0 from a parameter source
        return flat + (r.sync() instanceof ZeroSharding z ? z.bytes() : 0);
    }

    /**
     * The optimizer's state buffers (what a checkpoint saves): with bf16 working weights m and v, their fp32 master
     * left out, as the model-state line has always counted them (the master is the optimizer's working copy).
     */
    private static long optimizerBytes(RankStep r) {
        long sum = 0;
        for (MemorySegment m : r.optimizer().state().values()) {
            sum += m.byteSize();
        }
        return sum;
    }
}
