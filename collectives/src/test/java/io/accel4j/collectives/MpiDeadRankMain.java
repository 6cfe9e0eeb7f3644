package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * Run under {@code mpirun -np 2} by {@link MpiDeadRankTest}: both ranks all-reduce once (so that the job is really
 * connected), then the last rank dies mid-run ({@code Runtime.halt(3)}: no MPI_Finalize, no shutdown hooks) while
 * the others enter a second all-reduce. A survivor must fail within {@code timeoutMillis} (the first argument) with a
 * {@link CollectiveException}: it prints {@code SURVIVOR rank r: <message>} and exits 1 without finalizing; a
 * survivor whose collective completed prints {@code UNEXPECTED} and exits 0.
 */
public final class MpiDeadRankMain {

    private MpiDeadRankMain() {}

    public static void main(String[] args) {
        Duration timeout = Duration.ofMillis(Long.parseLong(args[0]));
        int count = 100_003;
        MpiCommunicator comm = MpiCommunicator.world(timeout);
        Arena arena = Arena.ofShared();
        MemorySegment buf = MpiSmokeMain.fill(arena, comm.rank(), 0, count, DType.FP32);
        comm.allReduce(buf, count, DType.FP32, ReduceOp.SUM);
        System.out.println("CONNECTED rank " + comm.rank() + " of " + comm.size());
        System.out.flush();
        if (comm.rank() == comm.size() - 1) {
            Runtime.getRuntime().halt(3); // dies between two collectives, as a crashed process would
        }
        long start = System.nanoTime();
        try {
            comm.allReduce(buf, count, DType.FP32, ReduceOp.SUM);
            System.out.println("UNEXPECTED rank " + comm.rank() + ": the all-reduce completed without its peer");
            System.out.flush();
            System.exit(0);
        } catch (CollectiveException e) {
            System.out.printf("SURVIVOR rank %d: after %d ms: %s%n", comm.rank(),
                    (System.nanoTime() - start) / 1_000_000, e.getMessage());
            System.out.flush();
            System.exit(1); // without MPI_Finalize: the stuck call still holds MPI
        }
    }
}
