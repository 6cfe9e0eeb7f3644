package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test {@link Communicator} that behaves like NCCL towards the trainer, on the CPU: {@link #deviceBuffers()} is
 * true, and every buffer must be a device segment of this rank's {@link StrictMemory} (a view the host cannot
 * dereference). It hands the collective the view's host shadow — the "device memory" itself, as NCCL reads a GPU's
 * buffers in place — on a host communicator (an {@code InProcessGroup}'s ring), so the results are the ring's bit for
 * bit. A host segment, or a view of another memory or of a closed arena, is an {@link IllegalArgumentException}
 * naming the collective and the argument, as NCCL would fail (asynchronously) on a host pointer.
 */
final class StrictCommunicator implements Communicator {

    private final Communicator host;
    private final StrictMemory memory;
    private final AtomicLong calls = new AtomicLong();

    /** Rank {@code host.rank()} taking buffers of {@code memory}; closing this closes {@code host}. */
    StrictCommunicator(Communicator host, StrictMemory memory) {
        this.host = Objects.requireNonNull(host, "host");
        this.memory = Objects.requireNonNull(memory, "memory");
    }

    /** Collectives issued so far. */
    long calls() {
        return calls.get();
    }

    private MemorySegment device(String collective, String arg, MemorySegment s) {
        return memory.shadow(collective + "'s " + arg, s);
    }

    @Override
    public boolean deviceBuffers() {
        return true;
    }

    @Override
    public int rank() {
        return host.rank();
    }

    @Override
    public int size() {
        return host.size();
    }

    @Override
    public Duration timeout() {
        return host.timeout();
    }

    @Override
    public Pending allReduceAsync(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        MemorySegment b = device("allReduce", "buf", buf);
        calls.incrementAndGet();
        return host.allReduceAsync(b, count, dtype, op);
    }

    @Override
    public Pending reduceScatterAsync(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        MemorySegment s = device("reduceScatter", "send", send), r = device("reduceScatter", "recv", recv);
        calls.incrementAndGet();
        return host.reduceScatterAsync(s, r, count, dtype, op);
    }

    @Override
    public Pending allGatherAsync(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        // shadows keep the views' addresses, so an in-place gather stays in place
        MemorySegment s = device("allGather", "send", send), r = device("allGather", "recv", recv);
        calls.incrementAndGet();
        return host.allGatherAsync(s, r, count, dtype);
    }

    @Override
    public Pending broadcastAsync(MemorySegment buf, long count, DType dtype, int root) {
        MemorySegment b = device("broadcast", "buf", buf);
        calls.incrementAndGet();
        return host.broadcastAsync(b, count, dtype, root);
    }

    @Override
    public Pending barrierAsync() {
        calls.incrementAndGet();
        return host.barrierAsync();
    }

    @Override
    public Pending sendAsync(MemorySegment buf, long count, DType dtype, int peer) {
        MemorySegment b = device("send", "buf", buf);
        calls.incrementAndGet();
        return host.sendAsync(b, count, dtype, peer);
    }

    @Override
    public Pending recvAsync(MemorySegment buf, long count, DType dtype, int peer) {
        MemorySegment b = device("recv", "buf", buf);
        calls.incrementAndGet();
        return host.recvAsync(b, count, dtype, peer);
    }

    @Override
    public void close() {
        host.close();
    }
}
