package io.accel4j.collectives;

import io.accel4j.collectives.InProcessGroup.Call;
import io.accel4j.collectives.InProcessGroup.Channel;
import io.accel4j.collectives.InProcessGroup.Slot;
import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;

/**
 * Rank {@code r} of an {@link InProcessGroup}: the ring collectives on shared memory.
 *
 * <p>Rank {@code r} owns staging buffer {@code S_r}; only its right neighbour {@code r+1} reads it. Every collective is
 * a sequence of steps numbered over the group's life; rank {@code r} runs step {@code k} once its left neighbour has
 * completed step {@code k−1} ({@code progress ≥ k}), and overwrites {@code S_r} for a new collective only once its
 * right neighbour has completed the previous one. Step 0 copies the input into {@code S_r} (fp32 for reductions).
 * <ul>
 *   <li><b>Reduce-scatter</b>, steps {@code s = 0…N−2}: rank {@code r} adds the left's chunk
 *       {@code c = (r−s−2) mod N} into its own, so after {@code N−1} steps it holds chunk {@code r} fully reduced,
 *       summed in the fixed order {@code x_{c+1} + x_{c+2} + … + x_c} (rank indices mod N, starting at the rank after
 *       the chunk's owner); AVG divides chunk {@code r} by {@code N} in the last step.</li>
 *   <li><b>All-gather</b>, steps {@code t = 0…N−2}: rank {@code r} copies the left's chunk {@code (r−1−t) mod N}.</li>
 * </ul>
 * Each rank thus moves {@code 2(N−1)/N} of the data for an all-reduce. Broadcast passes the root's buffer along the
 * ring ({@code N−1} steps, one copy per rank); a barrier is {@code N−1} empty steps (step {@code N−1} on any rank
 * implies every rank has entered). An fp32 all-reduce of a shared off-heap buffer skips the staging copies: the
 * buffer itself is published (reduced in place) and the call returns once the right neighbour has finished reading
 * it. Send/recv use a one-message mailbox per direction (eager: send returns once the
 * data is in the mailbox; the next send to the same peer waits until it has been received).
 */
final class RingCommunicator extends AbstractCommunicator {

    /** A thread that never runs: a segment it may access is one every rank's thread may access. */
    private static final Thread ANY_OTHER_THREAD = new Thread(() -> {});

    private final InProcessGroup g;
    private final int n;
    private final int leftRank;
    private final int rightRank;
    private final Slot me;
    private final Slot left;
    private final Slot right;
    private long seq; // ring collectives entered
    private int splits; // splits called on this rank (the same count on every rank: a split is a collective)

    RingCommunicator(InProcessGroup g, int rank, int size, Duration timeout) {
        super(rank, size, timeout);
        this.g = g;
        this.n = size;
        this.leftRank = (rank - 1 + size) % size;
        this.rightRank = (rank + 1) % size;
        this.me = g.slots[rank];
        this.left = g.slots[leftRank];
        this.right = g.slots[rightRank];
    }

    @Override
    protected boolean blockingInline() {
        return true;
    }

    // ---------------------------------------------------------------- the collectives

    @Override
    protected void runAllReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        Call c = begin("allReduce", count + " × " + dtype + ", " + op);
        guard(c, () -> {
            if (dtype == DType.FP32 && buf.isNative() && buf.isAccessibleBy(ANY_OTHER_THREAD)) {
                // zero-copy: the neighbour reads buf itself; return only once it has finished reading it
                me.publish(buf);
                publish(c.base());
                long k = reduceScatterSteps(c, c.base() + 1, count, op);
                allGatherSteps(c, k, count, Float.BYTES);
                long end = k + n - 1;
                g.await(rank(), c, rightRank, () -> right.progress >= end);
                return;
            }
            MemorySegment s = stageReduce(buf, 0, count, dtype);
            long k = reduceScatterSteps(c, c.base() + 1, count, op);
            allGatherSteps(c, k, count, Float.BYTES);
            unstage(s, 0, buf, count, dtype);
        });
    }

    @Override
    protected void runReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        Call c = begin("reduceScatter", count + " × " + dtype + ", " + op);
        guard(c, () -> {
            MemorySegment s = stageReduce(send, 0, count, dtype);
            reduceScatterSteps(c, c.base() + 1, count, op);
            unstage(s, Chunks.start(count, n, rank()), recv, Chunks.length(count, n, rank()), dtype);
        });
    }

    @Override
    protected void runAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        Call c = begin("allGather", count + " × " + dtype);
        guard(c, () -> {
            int b = dtype.byteSize();
            MemorySegment s = me.staging(count * b);
            long mine = Chunks.length(count, n, rank());
            MemorySegment.copy(send, 0, s, Chunks.start(count, n, rank()) * b, mine * b);
            publish(c.base());
            allGatherSteps(c, c.base() + 1, count, b);
            MemorySegment.copy(s, 0, recv, 0, count * b);
        });
    }

    @Override
    protected void runBroadcast(MemorySegment buf, long count, DType dtype, int root) {
        Call c = begin("broadcast", count + " × " + dtype + ", root " + root);
        guard(c, () -> {
            long bytes = count * dtype.byteSize();
            MemorySegment s = me.staging(bytes);
            if (rank() == root) {
                MemorySegment.copy(buf, 0, s, 0, bytes);
            }
            publish(c.base());
            int dist = (rank() - root + n) % n;
            for (int t = 0; t < n - 1; t++) {
                long k = c.base() + 1 + t;
                awaitLeft(c, k);
                if (dist == t + 1) {
                    MemorySegment.copy(left.staging, 0, s, 0, bytes);
                }
                publish(k);
            }
            if (rank() != root) {
                MemorySegment.copy(s, 0, buf, 0, bytes);
            }
        });
    }

    @Override
    protected void runBarrier() {
        Call c = begin("barrier", "");
        guard(c, () -> {
            publish(c.base());
            for (int t = 0; t < n - 1; t++) {
                long k = c.base() + 1 + t;
                awaitLeft(c, k);
                publish(k);
            }
        });
    }

    @Override
    protected void runSend(MemorySegment buf, long count, DType dtype, int peer) {
        Call c = p2p("send", "send to rank " + peer + " (" + count + " × " + dtype + ")");
        guard(c, () -> {
            Channel ch = g.channel(rank(), peer);
            g.await(rank(), c, peer, () -> ch.taken == ch.sent); // the previous message has been received
            long bytes = count * dtype.byteSize();
            if (ch.buffer.byteSize() < bytes) {
                ch.buffer = g.allocate(bytes);
            }
            MemorySegment.copy(buf, 0, ch.buffer, 0, bytes);
            ch.count = count;
            ch.dtype = dtype;
            ch.sent = ch.sent + 1; // publishes the fields above
            InProcessGroup.wake(g.slots[peer]);
        });
    }

    @Override
    protected void runRecv(MemorySegment buf, long count, DType dtype, int peer) {
        Call c = p2p("recv", "recv from rank " + peer + " (" + count + " × " + dtype + ")");
        guard(c, () -> {
            Channel ch = g.channel(peer, rank());
            g.await(rank(), c, peer, () -> ch.sent > ch.taken);
            if (ch.count != count || ch.dtype != dtype) {
                g.fail(List.of(peer, rank()), "disagree: rank " + peer + " sent " + ch.count + " × " + ch.dtype
                        + ", rank " + rank() + " expected " + count + " × " + dtype, null);
                g.checkFailure(rank(), c);
            }
            MemorySegment.copy(ch.buffer, 0, buf, 0, count * dtype.byteSize());
            ch.taken = ch.taken + 1;
            InProcessGroup.wake(g.slots[peer]);
        });
    }

    /**
     * Gathers every rank's color and key over this ring ({@link SplitPlan}), then joins the in-process group of its
     * color, made by the first member to arrive (keyed by this split's number and the color).
     */
    @Override
    public Communicator split(int color, int key) {
        SplitPlan plan = SplitPlan.exchange(this, color, key);
        int id = ++splits;
        String parent = g.name() == null ? "" : " of " + g.name();
        InProcessGroup child = g.child("split " + id + ", color " + color, plan.size(), plan.describe() + parent);
        return child.communicator(plan.rank());
    }

    @Override
    protected void onClose(boolean midCollective) {
        if (midCollective) {
            g.fail(List.of(rank()), "closed its communicator mid-collective", null);
        }
        me.closed = true;
        for (Slot s : g.slots) {
            InProcessGroup.wake(s);
        }
    }

    // ---------------------------------------------------------------- steps

    /** Enters a ring collective: waits until the right neighbour is done with the previous one. */
    private Call begin(String collective, String detail) {
        seq++;
        String label = collective + " #" + seq + (detail.isEmpty() ? "" : " (" + detail + ")");
        Call c = new Call(collective, label, seq, me.progress, System.nanoTime());
        g.checkFailure(rank(), c);
        g.await(rank(), c, rightRank, () -> right.progress >= c.base());
        me.signature = label;
        me.entered = seq;
        return c;
    }

    private Call p2p(String collective, String label) {
        Call c = new Call(collective, label, 0, 0, System.nanoTime());
        g.checkFailure(rank(), c);
        return c;
    }

    /** Runs a collective's body; an unexpected exception in it fails the group, naming this rank. */
    private void guard(Call c, Runnable body) {
        try {
            body.run();
        } catch (CollectiveException e) {
            throw e;
        } catch (RuntimeException | Error e) {
            g.fail(List.of(rank()), "failed in " + c.label() + ": " + e, e);
            throw g.failed(rank(), c, new InProcessGroup.Failure(List.of(rank()), "failed: " + e, e));
        }
    }

    /** Waits for the left neighbour to complete step {@code k − 1}; at the first step, checks it called the same. */
    private void awaitLeft(Call c, long k) {
        g.await(rank(), c, leftRank, () -> left.progress >= k);
        if (k == c.base() + 1 && !c.label().equals(left.signature)) {
            g.fail(List.of(leftRank, rank()), "called different collectives: rank " + leftRank + " "
                    + left.signature + ", rank " + rank() + " " + c.label(), null);
            g.checkFailure(rank(), c);
        }
    }

    /** Marks step {@code k} done and wakes the neighbours. */
    private void publish(long k) {
        me.progress = k + 1;
        InProcessGroup.wake(right);
        InProcessGroup.wake(left);
    }

    /** Step 0 of a reduction: {@code count} elements of {@code in} into {@code S_r} as fp32. */
    private MemorySegment stageReduce(MemorySegment in, long from, long count, DType dtype) {
        MemorySegment s = me.staging(count * Float.BYTES);
        if (dtype == DType.FP32) {
            MemorySegment.copy(in, from * Float.BYTES, s, 0, count * Float.BYTES);
        } else {
            Casts.bf16ToF32(s, 0, in, from, count);
        }
        publish(me.progress);
        return s;
    }

    /** {@code count} fp32 values of {@code s} from element {@code from} into {@code out} as {@code dtype}. */
    private static void unstage(MemorySegment s, long from, MemorySegment out, long count, DType dtype) {
        if (dtype == DType.FP32) {
            MemorySegment.copy(s, from * Float.BYTES, out, 0, count * Float.BYTES);
        } else {
            Casts.f32ToBf16(out, 0, s, from, count);
        }
    }

    /** The ring reduce-scatter over fp32 staging, steps {@code k0 … k0+N−2}; returns the next step. */
    private long reduceScatterSteps(Call c, long k0, long count, ReduceOp op) {
        MemorySegment s = me.staging;
        for (int step = 0; step < n - 1; step++) {
            long k = k0 + step;
            awaitLeft(c, k);
            int chunk = Math.floorMod(rank() - step - 2, n);
            long off = Chunks.start(count, n, chunk) * Float.BYTES;
            Reduce.combine(op, s, off, left.staging, off, Chunks.length(count, n, chunk));
            if (step == n - 2 && op == ReduceOp.AVG) {
                Reduce.divide(s, off, Chunks.length(count, n, chunk), n);
            }
            publish(k);
        }
        return k0 + n - 1;
    }

    /** The ring all-gather of {@code b}-byte elements, steps {@code k0 … k0+N−2}. */
    private void allGatherSteps(Call c, long k0, long count, int b) {
        MemorySegment s = me.staging;
        for (int t = 0; t < n - 1; t++) {
            long k = k0 + t;
            awaitLeft(c, k);
            int chunk = Math.floorMod(rank() - 1 - t, n);
            long off = Chunks.start(count, n, chunk) * b;
            MemorySegment.copy(left.staging, off, s, off, Chunks.length(count, n, chunk) * b);
            publish(k);
        }
    }
}
