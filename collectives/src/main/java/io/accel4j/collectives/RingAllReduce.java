package io.accel4j.collectives;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * One rank's ring all-reduce over fp32 values, written once over two seams so that the very loop {@link NcclRing}
 * queues on the GPU can also run on the host: a {@link Link} moves chunks between neighbours (NCCL's grouped
 * {@code ncclSend}/{@code ncclRecv} on the GPU; queues between threads in the host simulation), a {@link Reducer}
 * combines and divides them ({@code ring.cu}'s kernels on the GPU; the same Java arithmetic on the host). The steps are
 * {@link RingSchedule}'s: reduce-scatter, AVG's one division of the owned chunk, all-gather.
 *
 * <p>{@code scratch} must hold {@link #scratchFloats} floats: the received chunk lands there before it is combined.
 * What the host run cannot show is what NCCL and the devices do between the calls: transport (NVLink, PCIe, sockets),
 * stream ordering across devices, and a group's send and receive completing together; only a multi-GPU machine runs
 * those.
 */
final class RingAllReduce {

    private RingAllReduce() {}

    /** Moves one step's chunks: sends to the right neighbour and receives from the left one, together. */
    interface Link {
        /** Sends {@code sendCount} floats of {@code send}; receives {@code recvCount} floats into {@code recv}. */
        void exchange(MemorySegment send, long sendCount, MemorySegment recv, long recvCount);
    }

    /** The element-wise arithmetic: {@code ring_combine_f32} and {@code ring_divide_f32}. */
    interface Reducer {
        /** {@code acc[i] ← acc[i] + in[i]}, or {@code Math.max(acc[i], in[i])} when {@code max}, for i &lt; n. */
        void combine(MemorySegment acc, MemorySegment in, long n, boolean max);

        /** {@code x[i] ← x[i] / divisor}, for i &lt; n. */
        void divide(MemorySegment x, long n, float divisor);
    }

    /** The scratch floats an all-reduce of {@code count} elements over {@code n} ranks needs: a longest chunk. */
    static long scratchFloats(long count, int n) {
        return n > 1 && count > 0 ? Chunks.length(count, n, n - 1) : 0; // the last chunk is a longest
    }

    /**
     * Rank {@code r} of {@code n}: {@code buf}'s first {@code count} floats become the reduction of every rank's, in
     * {@link RingCommunicator}'s order of operations (so the results are its bits).
     */
    static void run(int n, int r, MemorySegment buf, long count, ReduceOp op, MemorySegment scratch, Link link,
                    Reducer reducer) {
        Objects.requireNonNull(op, "op");
        Objects.requireNonNull(link, "link");
        Objects.requireNonNull(reducer, "reducer");
        if (n > 1 && count > 0) {
            boolean max = op == ReduceOp.MAX;
            boolean divided = op != ReduceOp.AVG;
            for (RingSchedule.Step step : RingSchedule.steps(n, r)) {
                if (!step.combine() && !divided) {
                    reducer.divide(chunk(buf, count, n, r), Chunks.length(count, n, r), n);
                    divided = true;
                }
                long sendCount = Chunks.length(count, n, step.send());
                long recvCount = Chunks.length(count, n, step.recv());
                MemorySegment into = step.combine() ? scratch : chunk(buf, count, n, step.recv());
                link.exchange(chunk(buf, count, n, step.send()), sendCount, into, recvCount);
                if (step.combine()) {
                    reducer.combine(chunk(buf, count, n, step.recv()), scratch, recvCount, max);
                }
            }
        } else if (op == ReduceOp.AVG && count > 0) {
            reducer.divide(buf, count, n); // N = 1: the contract's sum / 1, computed like N > 1
        }
    }

    private static MemorySegment chunk(MemorySegment buf, long count, int n, int q) {
        return buf.asSlice(Chunks.start(count, n, q) * Float.BYTES, Chunks.length(count, n, q) * Float.BYTES);
    }
}
