package io.accel4j.train.parallel;

import io.accel4j.collectives.AbstractCommunicator;
import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * Rank {@code rank} of {@code size} with nobody else: for {@code BatchSizeFinder.trialStep}, which allocates and runs
 * one rank's ZeRO step alone. The collectives move only this rank's own data (a reduce-scatter copies its chunk of its
 * own input, an all-gather places its own chunk), so the numbers are not a real run's — the trial throws them away —
 * but every buffer is touched as in one. Point-to-point calls are refused: nobody would answer.
 */
public final class TrialCommunicator extends AbstractCommunicator {

    public TrialCommunicator(int rank, int size) {
        super(rank, size, Duration.ofMinutes(1));
    }

    @Override
    protected boolean blockingInline() {
        return true;
    }

    @Override
    protected void runAllReduce(MemorySegment buf, long count, DType dtype, ReduceOp op) {
        // this rank's values are the "reduction"
    }

    @Override
    protected void runReduceScatter(MemorySegment send, MemorySegment recv, long count, DType dtype, ReduceOp op) {
        int b = dtype.byteSize();
        MemorySegment.copy(send, Chunks.start(count, size(), rank()) * b, recv, 0,
                Chunks.length(count, size(), rank()) * b);
    }

    @Override
    protected void runAllGather(MemorySegment send, MemorySegment recv, long count, DType dtype) {
        int b = dtype.byteSize();
        MemorySegment.copy(send, 0, recv, Chunks.start(count, size(), rank()) * b,
                Chunks.length(count, size(), rank()) * b);
    }

    @Override
    protected void runBroadcast(MemorySegment buf, long count, DType dtype, int root) {
    }

    @Override
    protected void runBarrier() {
    }

    @Override
    protected void runSend(MemorySegment buf, long count, DType dtype, int peer) {
        throw new UnsupportedOperationException("a trial rank has no peer " + peer);
    }

    @Override
    protected void runRecv(MemorySegment buf, long count, DType dtype, int peer) {
        throw new UnsupportedOperationException("a trial rank has no peer " + peer);
    }

    @Override
    protected void onClose(boolean midCollective) {
    }
}
