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
 * The loop is {@link RingAllReduce}'s (which the host simulation runs too), over NCCL and {@code ring.cu}: in one
 * NCCL group per step, send a chunk of {@code buf} to the right and receive the left's into the scratch buffer
 * (reduce-scatter: then {@code buf[c] ← buf[c] op scratch} by the kernel) or straight into {@code buf} (all-gather);
 * AVG divides the owned chunk by {@code N} in between.
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
        int right = (comm.rank() + 1) % n;
        int left = (comm.rank() - 1 + n) % n;
        long scratchFloats = RingAllReduce.scratchFloats(count, n);
        MemorySegment tmp = scratchFloats > 0 ? scratch(scratchFloats * Float.BYTES) : MemorySegment.NULL;
        RingAllReduce.run(n, comm.rank(), buf, count, op, tmp,
                (send, sendCount, recv, recvCount) -> exchange(send, sendCount, right, recv, recvCount, left),
                new RingAllReduce.Reducer() {
                    @Override
                    public void combine(MemorySegment acc, MemorySegment in, long length, boolean max) {
                        kernels.combine(acc, in, length, max, stream);
                    }

                    @Override
                    public void divide(MemorySegment x, long length, float divisor) {
                        kernels.divide(x, length, divisor, stream);
                    }
                });
    }

    /**
     * One ring step, one NCCL group: send {@code sendCount} floats to {@code right}, receive {@code recvCount} from
     * {@code left}.
     */
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
