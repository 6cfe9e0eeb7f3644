package io.accel4j.jmh;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.collectives.mpi.mpi_h;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * All-reduce bandwidth (fp32 SUM, in place) over a sweep of sizes, beside {@code memcpy}, outside JMH so that it can
 * run under {@code mpirun} (see {@code jmh/mpi-allreduce.sh}):
 * <ul>
 *   <li>{@code ring [N]}: the in-process ring, {@code N} (default 2) rank threads of this JVM;</li>
 *   <li>{@code mpi}, under {@code mpirun -np N}: {@link MpiCommunicator} (what the trainer uses; each call goes
 *       through its queue thread) and Open MPI's own {@code MPI_Allreduce} called directly on the main thread.</li>
 * </ul>
 * Each size: warm-up calls, then {@link #TRIALS} timed trials of the same number of back-to-back calls on every rank
 * (a barrier before each; the count depends only on the size, so every rank agrees), rank 0's median trial reported.
 * As nccl-tests defines them, with S bytes and t seconds a call: algbw = S / t, busbw = algbw · 2(N−1)/N. The
 * baseline is one {@code MemorySegment.copy} of S bytes on rank 0's thread, timed the same way in the same process;
 * "× copy" is busbw over that bandwidth. Rank 0 prints Markdown table rows.
 */
public final class AllReduceSweep {

    /** Timed trials per size; the median is reported. */
    static final int TRIALS = 5;
    /** Bytes moved per trial and rank: enough calls that small sizes are not timer noise, few for large ones. */
    static final long BYTES_PER_TRIAL = 256L << 20;
    static final int MIN_CALLS = 5;
    static final int MAX_CALLS = 20_000;

    private AllReduceSweep() {}

    /** One timed operation on {@code buf}'s first {@code count} floats. */
    @FunctionalInterface
    interface Op {
        void run(MemorySegment buf, long count);
    }

    public static void main(String[] args) {
        if (args.length == 0 || !(args[0].equals("ring") || args[0].equals("mpi"))) {
            System.err.println("usage: AllReduceSweep ring [RANKS] [SIZES] | AllReduceSweep mpi [SIZES] (under "
                    + "mpirun); SIZES like 1K,1M,64M,256M (binary units, default that list)");
            System.exit(2);
        }
        boolean ring = args[0].equals("ring");
        int ranks = ring && args.length > 1 ? Integer.parseInt(args[1]) : 2;
        String sizeArg = args.length > (ring ? 2 : 1) ? args[ring ? 2 : 1] : "1K,1M,64M,256M";
        long[] sizes = Arrays.stream(sizeArg.split(",")).mapToLong(AllReduceSweep::parseBytes).toArray();
        if (ring) {
            try (InProcessGroup group = InProcessGroup.create(ranks)) {
                group.run(comm -> {
                    sweep(comm, sizes, List.of(
                            new Named("ring (in-process)", (b, n) -> comm.allReduce(b, n, DType.FP32, ReduceOp.SUM))));
                    return null;
                });
            }
        } else {
            try (MpiCommunicator comm = MpiCommunicator.world()) {
                MemorySegment world = mpi_h.ompi_mpi_comm_world();
                sweep(comm, sizes, List.of(
                        new Named("MpiCommunicator", (b, n) -> comm.allReduce(b, n, DType.FP32, ReduceOp.SUM)),
                        new Named("MPI_Allreduce (direct)", (b, n) -> direct(b, n, world))));
            }
        }
    }

    record Named(String name, Op op) {}

    /** Open MPI's {@code MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)} on this thread. */
    private static void direct(MemorySegment buf, long count, MemorySegment world) {
        int rc = mpi_h.MPI_Allreduce(mpi_h.MPI_IN_PLACE, buf, Math.toIntExact(count), mpi_h.ompi_mpi_float(),
                mpi_h.ompi_mpi_op_sum(), world);
        if (rc != mpi_h.MPI_SUCCESS) {
            throw new IllegalStateException("MPI_Allreduce failed: MPI error " + rc);
        }
    }

    /** Runs every op and the copy at every size on this rank; rank 0 prints the rows. */
    static void sweep(Communicator comm, long[] sizes, List<Named> ops) {
        int n = comm.size();
        boolean lead = comm.rank() == 0;
        if (lead) {
            System.out.printf(Locale.ROOT, "%n%d ranks; median of %d trials, each %d..%d calls of ~%d MiB in all%n%n",
                    n, TRIALS, MIN_CALLS, MAX_CALLS, BYTES_PER_TRIAL >> 20);
            System.out.println("| bytes | backend | µs/call | algbw GB/s | busbw GB/s | copy GB/s | × copy |");
            System.out.println("|---:|---|---:|---:|---:|---:|---:|");
        }
        for (long bytes : sizes) {
            long count = bytes / Float.BYTES;
            int calls = calls(bytes);
            try (Arena arena = Arena.ofShared()) {
                MemorySegment buf = AllReduceBench.filled(arena, count);
                MemorySegment src = AllReduceBench.filled(arena, count), dst = arena.allocate(bytes, 64);
                Runnable copy = () -> MemorySegment.copy(src, 0, dst, 0, bytes);
                double copySeconds = Double.NaN;
                if (lead) {
                    repeat(Math.max(2, calls / 4), copy); // warm-up
                    copySeconds = medianSeconds(() -> repeat(calls, copy));
                }
                double copyGBs = bytes / (copySeconds / calls) / 1e9;
                for (Named op : ops) {
                    repeat(Math.max(2, calls / 4), () -> op.op().run(buf, count)); // warm-up
                    double t = medianSeconds(() -> {
                        comm.barrier();
                        repeat(calls, () -> op.op().run(buf, count));
                    });
                    if (lead) {
                        double perCall = t / calls, algbw = bytes / perCall / 1e9, busbw = algbw * 2 * (n - 1) / n;
                        System.out.printf(Locale.ROOT, "| %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f |%n",
                                human(bytes), op.name(), perCall * 1e6, algbw, busbw, copyGBs, busbw / copyGBs);
                        System.out.flush();
                    }
                }
                comm.barrier(); // no rank frees its buffers while another still reads them
            }
        }
    }

    static int calls(long bytes) {
        return (int) Math.max(MIN_CALLS, Math.min(MAX_CALLS, BYTES_PER_TRIAL / Math.max(1, bytes)));
    }

    private static void repeat(int times, Runnable r) {
        for (int i = 0; i < times; i++) {
            r.run();
        }
    }

    /** The median wall time of {@link #TRIALS} runs of {@code trial}. */
    private static double medianSeconds(Runnable trial) {
        List<Double> t = new ArrayList<>();
        for (int i = 0; i < TRIALS; i++) {
            long start = System.nanoTime();
            trial.run();
            t.add((System.nanoTime() - start) / 1e9);
        }
        t.sort(null);
        return t.get(TRIALS / 2);
    }

    static long parseBytes(String s) {
        String v = s.strip().toUpperCase(Locale.ROOT);
        long unit = v.endsWith("K") ? 1L << 10 : v.endsWith("M") ? 1L << 20 : v.endsWith("G") ? 1L << 30 : 1;
        long n = Long.parseLong(unit == 1 ? v : v.substring(0, v.length() - 1)) * unit;
        if (n < Float.BYTES || n % Float.BYTES != 0) {
            throw new IllegalArgumentException("a size must be a positive multiple of 4 bytes, got " + s);
        }
        return n;
    }

    static String human(long bytes) {
        return bytes >= 1L << 20 ? (bytes >> 20) + " MiB" : bytes >= 1L << 10 ? (bytes >> 10) + " KiB" : bytes + " B";
    }
}
