package io.accel4j.collectives;

import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.NcclComm;
import io.accel4j.cuda.Stream;
import io.accel4j.cuda.bindings.nccl_h;
import io.accel4j.kernels.GpuOps;
import io.accel4j.kernels.RingKernels;
import java.lang.foreign.MemorySegment;

/**
 * {@link NcclCommunicator#ringAllReduceAsync}: {@link RingCommunicator}'s ring all-reduce on the GPU, from
 * {@code ncclSend}/{@code ncclRecv} and {@code ring.cu}'s combine kernel, everything queued on one stream (fp32).
 * The steps are {@link RingSchedule}'s: in one NCCL group per step, send a chunk of {@code buf} to the right and
 * receive the left's into the scratch buffer (reduce-scatter: then {@code buf[c] ← buf[c] op scratch} by the kernel)
 * or straight into {@code buf} (all-gather); AVG divides the owned chunk by {@code N} in between.
 * The scratch buffer holds the longest chunk and grows when a larger all-reduce comes; it is freed by
 * {@link #close()}.
 */
final class NcclRing implements AutoCloseable {

    private final CudaContext context;
    private final NcclComm comm;
    private final Stream stream;
    private final RingKernels kernels;
    private DeviceBuffer scratch;

    NcclRing(CudaContext context, NcclComm comm, Stream stream) {
        this.context = context;
        this.comm = comm;
        this.stream = stream;
        this.kernels = new RingKernels(context);
    }

    /** Queues the all-reduce of {@code count} floats of the device view {@code buf}, in place. */
    void allReduce(MemorySegment buf, long count, ReduceOp op) {
        int n = comm.size();
        int r = comm.rank();
        boolean max = op == ReduceOp.MAX;
        if (n > 1 && count > 0) {
            MemorySegment tmp = scratch(Chunks.length(count, n, n - 1) * Float.BYTES); // the last chunk is a longest
            int right = (r + 1) % n;
            int left = (r - 1 + n) % n;
            boolean divided = op != ReduceOp.AVG;
            for (RingSchedule.Step step : RingSchedule.steps(n, r)) {
                if (!step.combine() && !divided) {
                    kernels.divide(chunk(buf, count, n, r), Chunks.length(count, n, r), n, stream);
                    divided = true;
                }
                long sendCount = Chunks.length(count, n, step.send());
                long recvCount = Chunks.length(count, n, step.recv());
                MemorySegment into = step.combine() ? tmp : chunk(buf, count, n, step.recv());
                exchange(chunk(buf, count, n, step.send()), sendCount, right, into, recvCount, left);
                if (step.combine()) {
                    kernels.combine(chunk(buf, count, n, step.recv()), tmp, recvCount, max, stream);
                }
            }
        } else if (op == ReduceOp.AVG && count > 0) {
            kernels.divide(buf, count, n, stream); // N = 1: the contract's sum / 1, computed like N > 1
        }
    }

    /** One ring step: send {@code sendCount} floats to {@code right} and receive {@code recvCount} from {@code left}. */
    private void exchange(MemorySegment send, long sendCount, int right, MemorySegment recv, long recvCount,
                          int left) {
        NcclComm.group(() -> {
            if (sendCount > 0) {
                comm.send(send, sendCount, nccl_h.ncclFloat32, right, stream);
            }
            if (recvCount > 0) {
                comm.recv(recv, recvCount, nccl_h.ncclFloat32, left, stream);
            }
        });
    }

    private static MemorySegment chunk(MemorySegment buf, long count, int n, int q) {
        return buf.asSlice(Chunks.start(count, n, q) * Float.BYTES, Chunks.length(count, n, q) * Float.BYTES);
    }

    private MemorySegment scratch(long bytes) {
        if (scratch == null || scratch.byteSize() < bytes) {
            if (scratch != null) {
                stream.synchronize(); // earlier steps may still read it
                scratch.close();
                scratch = null;
            }
            scratch = context.allocate(Math.max(bytes, Float.BYTES));
        }
        return GpuOps.device(scratch);
    }

    @Override
    public void close() {
        try {
            if (scratch != null) {
                scratch.close();
            }
        } finally {
            kernels.close();
        }
    }
}
