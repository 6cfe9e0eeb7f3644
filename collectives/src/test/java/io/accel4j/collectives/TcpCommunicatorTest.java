package io.accel4j.collectives;

import static io.accel4j.collectives.RingCollectivesTest.assertEqual;
import static io.accel4j.collectives.RingCollectivesTest.input;
import static io.accel4j.collectives.RingCollectivesTest.poisoned;
import static io.accel4j.collectives.RingCollectivesTest.segment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link TcpCommunicator}: N ranks as threads of this JVM, each with its own sockets (as separate processes would
 * have), against {@link CollectiveRef} (the ring's summation order: bit-exact, tolerance none) and, for the sums,
 * against a float64 reference within {@link #F64_ABS}; and its failures: a killed peer, a rank that never calls,
 * different configurations, world sizes, a port in use and nobody at the rendezvous address, all within bounded time.
 */
class TcpCommunicatorTest {

    /**
     * fp32 ring sum of N ≤ 4 values in [−1, 1] vs the float64 sum: at most N−1 roundings of a value ≤ N, so the error
     * is ≤ 3·4·2⁻²⁴ ≈ 7e-7 absolute; stated as 1e-6 absolute.
     */
    private static final double F64_ABS = 1e-6;
    private static final Duration TIMEOUT = Duration.ofSeconds(20);

    @FunctionalInterface
    interface Body<T> {
        T run(TcpCommunicator comm) throws Exception;
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs {@code body} on {@code n} threads, one TCP rank each; returns each rank's result or failure. */
    static <T> List<Object> group(int n, Duration timeout, long[] hashes, Body<T> body) {
        return groupOf("127.0.0.1:" + freePort(), n, n, timeout, hashes, body);
    }

    /** Ranks {@code 0 … here−1} of {@code n} on threads of this JVM (the others elsewhere), meeting at {@code at}. */
    static <T> List<Object> groupOf(String at, int n, int here, Duration timeout, Body<T> body) {
        return groupOf(at, n, here, timeout, null, body);
    }

    private static <T> List<Object> groupOf(String at, int n, int here, Duration timeout, long[] hashes,
                                            Body<T> body) {
        ExecutorService pool = Executors.newFixedThreadPool(here);
        try {
            List<Future<Object>> fs = new ArrayList<>();
            for (int r = 0; r < here; r++) {
                int rank = r;
                fs.add(pool.submit(() -> {
                    try (TcpCommunicator c = TcpCommunicator.connect(at, rank, n, hashes == null ? 7 : hashes[rank],
                            timeout)) {
                        return (Object) body.run(c);
                    } catch (Exception | AssertionError e) {
                        return e;
                    }
                }));
            }
            List<Object> out = new ArrayList<>();
            for (Future<Object> f : fs) {
                out.add(f.get(2 * timeout.toMillis() + 10_000, TimeUnit.MILLISECONDS));
            }
            return out;
        } catch (Exception e) {
            throw new AssertionError("the group hung or failed: " + e, e);
        } finally {
            pool.shutdownNow();
        }
    }

    static void allSucceeded(List<Object> results) {
        for (Object o : results) {
            if (o instanceof Throwable t) {
                throw new AssertionError("a rank failed: " + t, t);
            }
        }
    }

    static Stream<Arguments> shapes() {
        List<Arguments> out = new ArrayList<>();
        for (int n : new int[] {1, 2, 3, 4}) {
            for (int count : new int[] {0, 1, 5, 100_003}) {
                out.add(Arguments.of(n, count));
            }
        }
        return out.stream();
    }

    @ParameterizedTest(name = "N={0} count={1}")
    @MethodSource("shapes")
    void reductionsAreTheInProcessRingsBitForBitAndCloseToFloat64(int n, int count) {
        long seed = 13L * n + count;
        float[][][] x = new float[2][n][];
        for (int q = 0; q < n; q++) {
            x[0][q] = input(seed, q, count, false);
            x[1][q] = input(seed, q, count, true);
        }
        float[] ringSum = CollectiveRef.allReduce(x[0], ReduceOp.SUM);
        for (int i = 0; i < count; i++) { // the ring's order is also close to the float64 sum
            double sum = 0;
            for (int q = 0; q < n; q++) {
                sum += x[0][q][i];
            }
            assertThat((double) ringSum[i]).as("element %d", i).isCloseTo(sum,
                    org.assertj.core.api.Assertions.within(F64_ABS));
        }
        DType[] dtypes = {DType.FP32, DType.BF16};
        allSucceeded(group(n, TIMEOUT, null, comm -> {
            int r = comm.rank();
            try (Arena arena = Arena.ofConfined()) {
                for (int d = 0; d < 2; d++) {
                    for (ReduceOp op : ReduceOp.values()) {
                        float[] want = CollectiveRef.allReduce(x[d], op);
                        if (dtypes[d] == DType.BF16) {
                            want = CollectiveRef.roundBf16(want);
                        }
                        String what = "seed " + seed + " rank " + r + " of " + n + " " + dtypes[d] + " " + op;
                        MemorySegment buf = segment(arena, x[d][r], 0, count, dtypes[d]);
                        comm.allReduce(buf, count, dtypes[d], op);
                        assertEqual("allReduce " + what, buf, want, 0, count, dtypes[d]);
                        int from = (int) Chunks.start(count, n, r), len = (int) Chunks.length(count, n, r);
                        MemorySegment recv = poisoned(arena, len, dtypes[d]);
                        comm.reduceScatter(segment(arena, x[d][r], 0, count, dtypes[d]), recv, count, dtypes[d], op);
                        assertEqual("reduceScatter " + what, recv, want, from, len, dtypes[d]);
                    }
                }
            }
            return null;
        }));
    }

    @ParameterizedTest(name = "N={0} count={1}")
    @MethodSource("shapes")
    void gatherBroadcastSendRecvAndBarrierMoveTheBytes(int n, int count) {
        long seed = 91L * n + count;
        float[][] x = new float[n][];
        for (int q = 0; q < n; q++) {
            x[q] = input(seed, q, count, false);
        }
        float[] gathered = new float[count];
        for (int q = 0; q < n; q++) {
            int from = (int) Chunks.start(count, n, q);
            System.arraycopy(x[q], from, gathered, from, (int) Chunks.length(count, n, q));
        }
        allSucceeded(group(n, TIMEOUT, null, comm -> {
            int r = comm.rank();
            try (Arena arena = Arena.ofConfined()) {
                int from = (int) Chunks.start(count, n, r), len = (int) Chunks.length(count, n, r);
                MemorySegment recv = poisoned(arena, count, DType.FP32);
                comm.allGather(segment(arena, x[r], from, len, DType.FP32), recv, count, DType.FP32);
                assertEqual("allGather rank " + r, recv, gathered, 0, count, DType.FP32);
                int root = n - 1;
                MemorySegment b = r == root ? segment(arena, x[root], 0, count, DType.FP32)
                        : poisoned(arena, count, DType.FP32);
                comm.broadcast(b, count, DType.FP32, root);
                assertEqual("broadcast rank " + r, b, x[root], 0, count, DType.FP32);
                comm.barrier();
                if (n > 1) { // a ring of messages: send to the right, receive from the left
                    int right = (r + 1) % n, left = (r - 1 + n) % n;
                    MemorySegment in = poisoned(arena, count, DType.FP32);
                    if (r % 2 == 0) {
                        comm.send(segment(arena, x[r], 0, count, DType.FP32), count, DType.FP32, right);
                        comm.recv(in, count, DType.FP32, left);
                    } else {
                        comm.recv(in, count, DType.FP32, left);
                        comm.send(segment(arena, x[r], 0, count, DType.FP32), count, DType.FP32, right);
                    }
                    assertEqual("recv rank " + r, in, x[left], 0, count, DType.FP32);
                }
            }
            return null;
        }));
    }

    @Test
    void asyncCollectivesCompleteInIssueOrder() {
        int n = 3, count = 10_001;
        allSucceeded(group(n, TIMEOUT, null, comm -> {
            try (Arena arena = Arena.ofShared()) {
                MemorySegment a = arena.allocate((long) count * 4), b = arena.allocate((long) count * 4);
                for (int i = 0; i < count; i++) {
                    a.setAtIndex(ValueLayout.JAVA_FLOAT, i, comm.rank() + 1);
                    b.setAtIndex(ValueLayout.JAVA_FLOAT, i, 2 * (comm.rank() + 1));
                }
                Pending pa = comm.allReduceAsync(a, count, DType.FP32, ReduceOp.SUM);
                Pending pb = comm.allReduceAsync(b, count, DType.FP32, ReduceOp.MAX);
                pb.await();
                pa.await();
                assertThat(a.getAtIndex(ValueLayout.JAVA_FLOAT, count - 1)).isEqualTo(6f);
                assertThat(b.getAtIndex(ValueLayout.JAVA_FLOAT, 0)).isEqualTo(6f);
            }
            return null;
        }));
    }

    /** Each rank's failure message, by rank; asserts every rank failed. */
    private static List<String> failures(List<Object> results) {
        List<String> out = new ArrayList<>();
        for (int r = 0; r < results.size(); r++) {
            assertThat(results.get(r)).as("rank %d's outcome", r).isInstanceOf(Throwable.class);
            out.add(((Throwable) results.get(r)).getMessage());
        }
        return out;
    }

    @Test
    void aKilledPeerFailsEveryOtherRankPromptlyNamingIt() {
        int n = 4, dead = 2;
        long t0 = System.nanoTime();
        ConcurrentHashMap<Integer, Boolean> killed = new ConcurrentHashMap<>();
        List<Object> res = group(n, TIMEOUT, null, comm -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment buf = arena.allocate(4L * 50_000);
                comm.allReduce(buf, 50_000, DType.FP32, ReduceOp.SUM);
                if (comm.rank() == dead) {
                    comm.killLinks(); // what the OS does to a killed process's sockets: no goodbye
                    killed.put(dead, true);
                    throw new IllegalStateException("killed");
                }
                for (int i = 0; i < 5; i++) {
                    comm.allReduce(buf, 50_000, DType.FP32, ReduceOp.SUM);
                }
            }
            return null;
        });
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertThat(seconds).as("failing takes far less than the 20 s timeout").isLessThan(10);
        List<String> msgs = failures(res);
        for (int r = 0; r < n; r++) {
            if (r != dead) {
                assertThat(msgs.get(r)).as("rank %d", r).contains("on rank " + r + " of 4 failed after")
                        .containsPattern("rank " + dead + "|rank " + ((dead + 1) % n) + " gave up");
            }
        }
        assertThat(msgs.get(dead + 1)).contains("lost the connection to rank 2");
    }

    @Test
    void aRankThatNeverCallsTimesOutNamingIt() {
        Duration t = Duration.ofMillis(800);
        List<Object> res = group(3, t, null, comm -> {
            if (comm.rank() == 1) {
                Thread.sleep(2500); // never calls, then leaves
                return null;
            }
            try (Arena arena = Arena.ofConfined()) {
                comm.allReduce(arena.allocate(64), 16, DType.FP32, ReduceOp.SUM);
            }
            return null;
        });
        assertThat(res.get(0)).isInstanceOf(CollectiveException.class);
        assertThat(res.get(2)).isInstanceOf(CollectiveException.class);
        // rank 2 waits on rank 1 (its left) itself; rank 0 on rank 2, which either gives up first and says why, or
        // times out at about the same moment itself
        assertThat(((Throwable) res.get(2)).getMessage()).contains("rank 1 did not send within the timeout");
        assertThat(((Throwable) res.get(0)).getMessage()).containsPattern("rank 1 did not send|rank 2 did not send");
    }

    @Test
    void aDifferentConfigurationIsRefusedNamingTheRank() {
        List<Object> res = group(3, TIMEOUT, new long[] {5, 5, 6}, comm -> null);
        List<String> msgs = failures(res);
        assertThat(msgs.get(0)).contains("rank 2's training configuration differs from rank 0's");
        assertThat(((CollectiveException) res.get(0)).culprits()).containsExactly(2);
        assertThat(msgs.get(2)).contains("refused the job: rank 2's training configuration differs");
    }

    @Test
    void aDifferentWorldSizeIsRefusedNamingTheRank() throws Exception {
        String at = "127.0.0.1:" + freePort();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<Object> zero = pool.submit(() -> attempt(at, 0, 2));
            Future<Object> one = pool.submit(() -> attempt(at, 1, 3));
            assertThat(((Throwable) zero.get(30, TimeUnit.SECONDS)).getMessage())
                    .contains("rank 1 was started with a world size of 3, rank 0 with 2");
            assertThat(((Throwable) one.get(30, TimeUnit.SECONDS)).getMessage()).contains("refused the job");
        } finally {
            pool.shutdownNow();
        }
    }

    private static Object attempt(String at, int rank, int size) {
        try (TcpCommunicator c = TcpCommunicator.connect(at, rank, size, 1, TIMEOUT)) {
            return c;
        } catch (RuntimeException e) {
            return e;
        }
    }

    @Test
    void aPortInUseAndNobodyListeningAreClearErrorsInBoundedTime() throws IOException {
        try (ServerSocket taken = new ServerSocket(0)) {
            String at = "127.0.0.1:" + taken.getLocalPort();
            assertThatThrownBy(() -> TcpCommunicator.connect(at, 0, 2, 1, TIMEOUT))
                    .isInstanceOf(CollectiveException.class).hasMessageContaining("rank 0 cannot listen at " + at);
        }
        String nobody = "127.0.0.1:" + freePort();
        long t0 = System.nanoTime();
        assertThatThrownBy(() -> TcpCommunicator.connect(nobody, 1, 2, 1, Duration.ofMillis(700)))
                .isInstanceOf(CollectiveException.class)
                .hasMessageContaining("rank 1: rank 0 at " + nobody + " did not answer within");
        assertThat((System.nanoTime() - t0) / 1e9).isLessThan(5);
    }
}
