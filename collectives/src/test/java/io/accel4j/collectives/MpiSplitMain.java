package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

/**
 * Run under {@code mpirun -np N} (N ≥ 2): {@code MPI_COMM_WORLD} split into the even and the odd ranks (ordered by
 * descending world rank, key −r), then in each group an fp32 all-reduce against a float64 sum (tolerance: ≤ N/2
 * values in (−1, 1) summed in fp32, 1e-5 absolute), an all-gather and a send/recv around the group's ring; prints
 * {@code SPLIT OK rank r of N} and exits 0, or prints the first difference and exits 1.
 */
public final class MpiSplitMain {

    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private MpiSplitMain() {}

    public static void main(String[] args) {
        int count = 1001;
        try (MpiCommunicator world = MpiCommunicator.world(Duration.ofSeconds(60)); Arena a = Arena.ofShared()) {
            int r = world.rank(), n = world.size();
            try (Communicator sub = world.split(r % 2, -r)) {
                int m = sub.size();
                int[] members = new int[m]; // world ranks of the group, in its order: descending
                for (int q = 0, w = n - 1; w >= 0; w--) {
                    if (w % 2 == r % 2) {
                        members[q++] = w;
                    }
                }
                check(members[sub.rank()] == r, "rank " + r + " is rank " + sub.rank() + " of its group");
                MemorySegment buf = a.allocate(count * 4L, 64);
                MemorySegment.copy(SplitTest.input(r, count), 0, buf, F32, 0, count);
                sub.allReduce(buf, count, DType.FP32, ReduceOp.SUM);
                for (int i = 0; i < count; i++) {
                    double want = 0;
                    for (int w : members) {
                        want += SplitTest.input(w, count)[i];
                    }
                    check(Math.abs(buf.getAtIndex(F32, i) - want) <= 1e-5, "allReduce[" + i + "] "
                            + buf.getAtIndex(F32, i) + " != " + want);
                }
                MemorySegment all = a.allocate(count * 4L, 64);
                long from = Chunks.start(count, m, sub.rank()), len = Chunks.length(count, m, sub.rank());
                MemorySegment mine = a.allocate(Math.max(1, len) * 4, 64);
                MemorySegment.copy(SplitTest.input(r, count), (int) from, mine, F32, 0, (int) len);
                sub.allGather(mine, all, count, DType.FP32);
                for (int q = 0; q < m; q++) {
                    float[] x = SplitTest.input(members[q], count);
                    for (long i = Chunks.start(count, m, q); i < Chunks.start(count, m, q + 1); i++) {
                        check(all.getAtIndex(F32, i) == x[(int) i], "allGather[" + i + "]");
                    }
                }
                if (m > 1) {
                    int right = (sub.rank() + 1) % m, left = (sub.rank() + m - 1) % m;
                    MemorySegment out = a.allocate(16, 64), in = a.allocate(16, 64);
                    out.setAtIndex(F32, 0, r);
                    Pending s = sub.sendAsync(out, 1, DType.FP32, right);
                    sub.recv(in, 1, DType.FP32, left);
                    s.await();
                    check(in.getAtIndex(F32, 0) == members[left], "recv " + in.getAtIndex(F32, 0));
                }
            }
            world.barrier();
            System.out.println("SPLIT OK rank " + r + " of " + n);
        } catch (RuntimeException e) {
            System.out.println("SPLIT FAILED: " + e.getMessage());
            System.exit(1);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }
}
