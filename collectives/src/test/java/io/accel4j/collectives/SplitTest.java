package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#split} on the in-process ring: membership and order ({@link SplitPlan}, MPI_Comm_split's rule),
 * the collectives of the split groups against a float64 reference, point-to-point inside a group, nested splits, a
 * timeout that names the group, a parent failure reaching its groups, and the NCCL id agreement
 * ({@link NcclGroupId}) over an in-process host group. Tolerance of the sums: the group's fp32 ring sum of at most 3
 * values in (−1, 1) against the float64 sum, ≤ 2 roundings of ≤ 2⁻²⁴·3 each: 1e-6 absolute.
 */
class SplitTest {

    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    static final double TOL = 1e-6;

    @Test
    void planOrdersByKeyThenParentRank() {
        int[] colors = {1, 0, 1, 1, 0};
        int[] keys = {5, 0, 5, -1, 0};
        SplitPlan p = SplitPlan.of(colors, keys, 2);
        assertThat(p.members()).containsExactly(3, 0, 2);
        assertThat(p.rank()).isEqualTo(2);
        assertThat(SplitPlan.of(colors, keys, 4).members()).containsExactly(1, 4);
        assertThat(SplitPlan.of(colors, keys, 4).rank()).isEqualTo(1);
    }

    static float[] input(int rank, int n) {
        SplittableRandom r = new SplittableRandom(1234 + rank);
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) r.nextDouble(-1, 1);
        }
        return x;
    }

    @Test
    void collectivesOnSplitGroupsEqualTheFloat64Reference() {
        int world = 6, n = 1001; // odd length: uneven chunks
        try (InProcessGroup g = InProcessGroup.create(world, Duration.ofSeconds(20))) {
            List<String> errors = g.run(comm -> {
                int r = comm.rank();
                int color = r % 2; // {0,2,4} and {1,3,5}, reversed by key
                try (Communicator sub = comm.split(color, -r); Arena a = Arena.ofShared()) {
                    int[] members = color == 0 ? new int[] {4, 2, 0} : new int[] {5, 3, 1};
                    assertThat(sub.size()).isEqualTo(3);
                    assertThat(members[sub.rank()]).isEqualTo(r);
                    // all-reduce SUM
                    MemorySegment buf = a.allocate((long) n * 4, 64);
                    MemorySegment.copy(input(r, n), 0, buf, F32, 0, n);
                    sub.allReduce(buf, n, DType.FP32, ReduceOp.SUM);
                    for (int i = 0; i < n; i++) {
                        double want = 0;
                        for (int m : members) {
                            want += input(m, n)[i];
                        }
                        if (Math.abs(buf.getAtIndex(F32, i) - want) > TOL) {
                            return "rank " + r + " allReduce[" + i + "] " + buf.getAtIndex(F32, i) + " != " + want;
                        }
                    }
                    // all-gather: chunk q of the result is member q's input chunk
                    MemorySegment all = a.allocate((long) n * 4, 64);
                    all.fill((byte) 0x7f);
                    long from = Chunks.start(n, 3, sub.rank()), len = Chunks.length(n, 3, sub.rank());
                    MemorySegment mine = a.allocate(len * 4, 64);
                    MemorySegment.copy(input(r, n), (int) from, mine, F32, 0, (int) len);
                    sub.allGather(mine, all, n, DType.FP32);
                    for (int q = 0; q < 3; q++) {
                        float[] x = input(members[q], n);
                        for (long i = Chunks.start(n, 3, q); i < Chunks.start(n, 3, q + 1); i++) {
                            if (all.getAtIndex(F32, i) != x[(int) i]) {
                                return "rank " + r + " allGather[" + i + "]";
                            }
                        }
                    }
                    // send/recv around the group's ring
                    int right = (sub.rank() + 1) % 3, left = (sub.rank() + 2) % 3;
                    MemorySegment out = a.allocate(5 * 4, 64), in = a.allocate(5 * 4, 64);
                    for (int i = 0; i < 5; i++) {
                        out.setAtIndex(F32, i, r * 10 + i);
                    }
                    if (sub.rank() % 2 == 0) {
                        sub.send(out, 5, DType.FP32, right);
                        sub.recv(in, 5, DType.FP32, left);
                    } else {
                        sub.recv(in, 5, DType.FP32, left);
                        sub.send(out, 5, DType.FP32, right);
                    }
                    for (int i = 0; i < 5; i++) {
                        if (in.getAtIndex(F32, i) != members[left] * 10 + i) {
                            return "rank " + r + " recv[" + i + "] " + in.getAtIndex(F32, i);
                        }
                    }
                    // the parent still works after the split
                    MemorySegment one = a.allocate(4, 64);
                    one.setAtIndex(F32, 0, 1f);
                    comm.allReduce(one, 1, DType.FP32, ReduceOp.SUM);
                    return one.getAtIndex(F32, 0) == world ? null : "parent sum " + one.getAtIndex(F32, 0);
                }
            });
            assertThat(errors).containsOnlyNulls();
        }
    }

    @Test
    void nestedSplitsAndTwoSplitsOfOneParent() {
        try (InProcessGroup g = InProcessGroup.create(4, Duration.ofSeconds(20))) {
            List<int[]> sizes = g.run(comm -> {
                int r = comm.rank();
                try (Communicator rows = comm.split(r / 2, r); Communicator cols = comm.split(r % 2, r);
                     Communicator single = rows.split(rows.rank(), 0); Arena a = Arena.ofShared()) {
                    MemorySegment v = a.allocate(4, 64);
                    v.setAtIndex(F32, 0, r);
                    rows.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                    float rowSum = v.getAtIndex(F32, 0);
                    v.setAtIndex(F32, 0, r);
                    cols.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                    float colSum = v.getAtIndex(F32, 0);
                    single.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                    return new int[] {(int) rowSum, (int) colSum, single.size()};
                }
            });
            assertThat(sizes.get(0)).containsExactly(1, 2, 1);
            assertThat(sizes.get(1)).containsExactly(1, 4, 1);
            assertThat(sizes.get(2)).containsExactly(5, 2, 1);
            assertThat(sizes.get(3)).containsExactly(5, 4, 1);
        }
    }

    @Test
    void aTimeoutInASplitGroupNamesTheGroup() {
        try (InProcessGroup g = InProcessGroup.create(4, Duration.ofMillis(400))) {
            assertThatThrownBy(() -> g.run(comm -> {
                int r = comm.rank();
                Communicator sub = comm.split(r % 2, r);
                if (r != 3) { // rank 3 (rank 1 of color 1) never arrives
                    try (Arena a = Arena.ofShared()) {
                        MemorySegment v = a.allocate(4, 64);
                        sub.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                    }
                } else {
                    Thread.sleep(1500);
                }
                sub.close();
                return null;
            })).isInstanceOf(CollectiveException.class)
                    .hasMessageContaining("of group color 1 (parent ranks [1, 3])")
                    .hasMessageContaining("rank 1 did not arrive");
        }
    }

    @Test
    void aFailureOfTheParentFailsItsGroups() {
        try (InProcessGroup g = InProcessGroup.create(4, Duration.ofSeconds(20))) {
            assertThatThrownBy(() -> g.run(comm -> {
                int r = comm.rank();
                try (Communicator sub = comm.split(r / 2, r); Arena a = Arena.ofShared()) {
                    if (r == 2) {
                        throw new IllegalStateException("boom");
                    }
                    MemorySegment v = a.allocate(4, 64);
                    sub.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                    sub.allReduce(v, 1, DType.FP32, ReduceOp.SUM);
                }
                return null;
            })).hasMessageContaining("boom");
        }
    }

    @Test
    void badColorIsRefused() {
        try (InProcessGroup g = InProcessGroup.create(1)) {
            assertThatThrownBy(() -> g.communicator(0).split(-1, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("color must be >= 0, got -1");
        }
    }

    @Test
    void ncclGroupsAgreeOnTheirIdOverTheHost() {
        try (InProcessGroup g = InProcessGroup.create(4, Duration.ofSeconds(20))) {
            List<byte[]> ids = g.run(comm -> {
                int r = comm.rank();
                NcclGroupId id = NcclGroupId.agree(comm, r % 2, 0, () -> {
                    byte[] b = new byte[NcclGroupId.ID_BYTES];
                    Arrays.fill(b, (byte) (100 + r)); // made by each group's rank 0 only
                    return b;
                });
                try (Communicator h = id.hostGroup()) {
                    assertThat(h.size()).isEqualTo(2);
                    return id.id();
                }
            });
            assertThat(ids.get(0)).containsOnly((byte) 100).hasSize(128);
            assertThat(ids.get(2)).isEqualTo(ids.get(0));
            assertThat(ids.get(1)).containsOnly((byte) 101);
            assertThat(ids.get(3)).isEqualTo(ids.get(1));
        }
    }
}
