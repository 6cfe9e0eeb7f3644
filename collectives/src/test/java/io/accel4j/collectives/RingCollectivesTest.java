package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.accel4j.core.Bf16;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every in-process ring collective × N ∈ {1,2,3,4,7} × lengths {0, 1, 5, 1000003} against {@link CollectiveRef}.
 * Tolerance: none. The ring sums each element in a fixed order that the reference reproduces, fp32 addition is
 * commutative, the vector and scalar loops are element-wise and bf16 is widened exactly and rounded once, so every
 * result must be bit-identical (outputs are poisoned with NaN first).
 */
class RingCollectivesTest {

    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    static final Duration TIMEOUT = Duration.ofSeconds(20);

    static Stream<Arguments> shapes() {
        List<Arguments> out = new ArrayList<>();
        for (int n : new int[] {1, 2, 3, 4, 7}) {
            for (int count : new int[] {0, 1, 5, 1_000_003}) {
                out.add(Arguments.of(n, count));
            }
        }
        return out.stream();
    }

    /** Rank {@code r}'s inputs for a seed, exactly representable in bf16 when {@code bf16}. */
    static float[] input(long seed, int r, int count, boolean bf16) {
        SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + r);
        float[] x = new float[count];
        for (int i = 0; i < count; i++) {
            float v = (float) rnd.nextDouble(-1, 1);
            x[i] = bf16 ? Bf16.toFloat(Bf16.fromFloat(v)) : v;
        }
        return x;
    }

    static MemorySegment segment(Arena arena, float[] x, int from, int count, DType dtype) {
        MemorySegment s = arena.allocate(Math.max(1, (long) count * dtype.byteSize()), 64);
        for (int i = 0; i < count; i++) {
            if (dtype == DType.FP32) {
                s.setAtIndex(F32, i, x[from + i]);
            } else {
                s.setAtIndex(I16, i, Bf16.fromFloat(x[from + i]));
            }
        }
        return s;
    }

    static MemorySegment poisoned(Arena arena, long count, DType dtype) {
        MemorySegment s = arena.allocate(Math.max(1, count * dtype.byteSize()), 64);
        for (long i = 0; i < count; i++) {
            if (dtype == DType.FP32) {
                s.setAtIndex(F32, i, Float.NaN);
            } else {
                s.setAtIndex(I16, i, (short) 0x7FC1);
            }
        }
        return s;
    }

    /** Asserts {@code seg[i]} (as dtype) equals {@code want[from + i]} bit for bit, naming the first difference. */
    static void assertEqual(String what, MemorySegment seg, float[] want, int from, int count, DType dtype) {
        for (int i = 0; i < count; i++) {
            float got = dtype == DType.FP32 ? seg.getAtIndex(F32, i) : Bf16.toFloat(seg.getAtIndex(I16, i));
            if (Float.floatToRawIntBits(got) != Float.floatToRawIntBits(want[from + i])) {
                fail(what + ": element " + i + " is " + got + ", expected " + want[from + i]);
            }
        }
    }

    @ParameterizedTest(name = "N={0} count={1}")
    @MethodSource("shapes")
    void allReduceAndReduceScatterMatchTheReference(int n, int count) {
        long seed = 31L * n + count;
        DType[] dtypes = {DType.FP32, DType.BF16};
        ReduceOp[] ops = ReduceOp.values();
        float[][][] x = new float[dtypes.length][n][];    // [dtype][rank]
        float[][][] want = new float[dtypes.length][ops.length][]; // [dtype][op], computed once for all ranks
        for (int d = 0; d < dtypes.length; d++) {
            boolean bf = dtypes[d] == DType.BF16;
            for (int q = 0; q < n; q++) {
                x[d][q] = input(seed, q, count, bf);
            }
            for (int o = 0; o < ops.length; o++) {
                float[] w = CollectiveRef.allReduce(x[d], ops[o]);
                want[d][o] = bf ? CollectiveRef.roundBf16(w) : w;
            }
        }
        try (InProcessGroup g = InProcessGroup.create(n, TIMEOUT)) {
            g.run(comm -> {
                int r = comm.rank();
                // blocking calls run on this thread, so a confined buffer is fine (and takes the staged path)
                try (Arena arena = Arena.ofConfined(); Arena shared = Arena.ofShared()) {
                    for (int d = 0; d < dtypes.length; d++) {
                        DType dtype = dtypes[d];
                        for (int o = 0; o < ops.length; o++) {
                            String what = "seed " + seed + " rank " + r + " of " + n + " " + dtype + " " + ops[o];
                            MemorySegment buf = segment(arena, x[d][r], 0, count, dtype);
                            comm.allReduce(buf, count, dtype, ops[o]);
                            assertEqual("allReduce " + what, buf, want[d][o], 0, count, dtype);
                            MemorySegment sharedBuf = segment(shared, x[d][r], 0, count, dtype); // fp32: zero-copy
                            comm.allReduce(sharedBuf, count, dtype, ops[o]);
                            assertEqual("allReduce (shared buffer) " + what, sharedBuf, want[d][o], 0, count, dtype);

                            MemorySegment send = segment(arena, x[d][r], 0, count, dtype);
                            int from = (int) Chunks.start(count, n, r), len = (int) Chunks.length(count, n, r);
                            MemorySegment recv = poisoned(arena, len, dtype);
                            comm.reduceScatter(send, recv, count, dtype, ops[o]);
                            assertEqual("reduceScatter " + what, recv, want[d][o], from, len, dtype);
                            assertEqual("reduceScatter's send " + what, send, x[d][r], 0, count, dtype); // untouched
                        }
                    }
                }
                return null;
            });
        }
    }

    @ParameterizedTest(name = "N={0} count={1}")
    @MethodSource("shapes")
    void allGatherBroadcastAndSendRecvMoveTheBytes(int n, int count) {
        long seed = 77L * n + count;
        float[][] x = new float[n][];
        for (int q = 0; q < n; q++) {
            x[q] = input(seed, q, count, false);
        }
        try (InProcessGroup g = InProcessGroup.create(n, TIMEOUT)) {
            g.run(comm -> {
                int r = comm.rank();
                String what = "seed " + seed + " rank " + r + " of " + n;
                try (Arena arena = Arena.ofConfined()) {
                    // all-gather, out of place: rank q's chunk comes from x[q]
                    float[] gathered = new float[count];
                    for (int q = 0; q < n; q++) {
                        for (long i = Chunks.start(count, n, q); i < Chunks.start(count, n, q + 1); i++) {
                            gathered[(int) i] = x[q][(int) i];
                        }
                    }
                    int from = (int) Chunks.start(count, n, r), len = (int) Chunks.length(count, n, r);
                    for (DType dtype : new DType[] {DType.FP32, DType.BF16}) {
                        float[] want = dtype == DType.BF16 ? CollectiveRef.roundBf16(gathered) : gathered;
                        MemorySegment recv = poisoned(arena, count, dtype);
                        comm.allGather(segment(arena, x[r], from, len, dtype), recv, count, dtype);
                        assertEqual("allGather " + dtype + " " + what, recv, want, 0, count, dtype);
                    }
                    // all-gather in place: send is this rank's slice of recv
                    MemorySegment inPlace = poisoned(arena, count, DType.FP32);
                    MemorySegment.copy(segment(arena, x[r], from, len, DType.FP32), 0, inPlace, from * 4L, len * 4L);
                    comm.allGather(inPlace.asSlice(from * 4L, len * 4L), inPlace, count, DType.FP32);
                    assertEqual("in-place allGather " + what, inPlace, gathered, 0, count, DType.FP32);
                    // broadcast from the last and the first rank
                    for (int root : new int[] {n - 1, 0}) {
                        MemorySegment buf = r == root ? segment(arena, x[r], 0, count, DType.FP32)
                                : poisoned(arena, count, DType.FP32);
                        comm.broadcast(buf, count, DType.FP32, root);
                        assertEqual("broadcast from " + root + " " + what, buf, x[root], 0, count, DType.FP32);
                    }
                    // send right, receive from the left (send is eager, so this ring of sends cannot deadlock)
                    if (n > 1) {
                        comm.send(segment(arena, x[r], 0, count, DType.FP32), count, DType.FP32, (r + 1) % n);
                        MemorySegment got = poisoned(arena, count, DType.FP32);
                        comm.recv(got, count, DType.FP32, (r - 1 + n) % n);
                        assertEqual("send/recv " + what, got, x[(r - 1 + n) % n], 0, count, DType.FP32);
                    }
                }
                return null;
            });
        }
    }

    @Test
    void aBarrierReturnsOnlyOnceEveryRankHasArrived() {
        int n = 4;
        AtomicIntegerArray arrived = new AtomicIntegerArray(n);
        try (InProcessGroup g = InProcessGroup.create(n, TIMEOUT)) {
            g.run(comm -> {
                for (int round = 1; round <= 3; round++) {
                    Thread.sleep(5L * comm.rank());
                    arrived.set(comm.rank(), round);
                    comm.barrier();
                    for (int q = 0; q < n; q++) {
                        assertThat(arrived.get(q)).as("rank %d after barrier %d", q, round).isGreaterThanOrEqualTo(round);
                    }
                }
                return null;
            });
        }
    }

    @Test
    void asyncCollectivesOverlapComputationAndCompleteInIssueOrder() {
        int n = 3, count = 200_003;
        long seed = 5;
        float[][] x = new float[n][];
        for (int q = 0; q < n; q++) {
            x[q] = input(seed, q, count, false);
        }
        float[] sum = CollectiveRef.allReduce(x, ReduceOp.SUM);
        float[] max = CollectiveRef.allReduce(x, ReduceOp.MAX);
        try (InProcessGroup g = InProcessGroup.create(n, TIMEOUT); Arena arena = Arena.ofShared()) {
            List<Double> work = g.run(comm -> {
                int r = comm.rank();
                MemorySegment a = segment(arena, x[r], 0, count, DType.FP32);
                MemorySegment b = segment(arena, x[r], 0, count, DType.FP32);
                Pending pa = comm.allReduceAsync(a, count, DType.FP32, ReduceOp.SUM);
                Pending pb = comm.allReduceAsync(b, count, DType.FP32, ReduceOp.MAX);
                double acc = 0; // computation while the all-reduces run
                for (int i = 1; i < 2_000_000; i++) {
                    acc += 1.0 / i;
                }
                pb.await();
                assertThat(pa.isDone()).as("issued first, so done first").isTrue();
                pa.await();
                assertEqual("async SUM rank " + r, a, sum, 0, count, DType.FP32);
                assertEqual("async MAX rank " + r, b, max, 0, count, DType.FP32);
                comm.allReduce(a, count, DType.FP32, ReduceOp.SUM); // a blocking call after async ones
                return acc;
            });
            assertThat(work).hasSize(n);
        }
    }

    @Test
    void chunksTileTheRangeInRankOrder() {
        assertThat(List.of(Chunks.length(5, 3, 0), Chunks.length(5, 3, 1), Chunks.length(5, 3, 2)))
                .containsExactly(1L, 2L, 2L);
        assertThat(List.of(Chunks.length(1, 3, 0), Chunks.length(1, 3, 1), Chunks.length(1, 3, 2)))
                .containsExactly(0L, 0L, 1L);
        for (int n = 1; n <= 9; n++) {
            for (long count : new long[] {0, 1, 7, 1_000_003, Long.MAX_VALUE / 2}) {
                long at = 0;
                for (int r = 0; r < n; r++) {
                    assertThat(Chunks.start(count, n, r)).isEqualTo(at);
                    long len = Chunks.length(count, n, r);
                    assertThat(len).isBetween(count / n, count / n + 1);
                    at += len;
                }
                assertThat(at).isEqualTo(count);
            }
        }
    }
}
