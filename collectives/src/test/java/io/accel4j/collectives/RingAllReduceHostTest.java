package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Issue 18: the ring all-reduce loop {@link NcclRing} queues on the GPU ({@link RingAllReduce#run}) run on the host,
 * N ranks on N threads: the {@link RingAllReduce.Link} is a queue per rank (what the left neighbour's grouped
 * {@code ncclSend} delivers), the {@link RingAllReduce.Reducer} the Java arithmetic {@code ring.cu}'s kernels are
 * checked against ({@code RingHostCheckTest}). Every step's sent and received counts must agree between neighbours,
 * the scratch is exactly {@link RingAllReduce#scratchFloats} floats (a larger use would fail the slice), and the
 * result must be {@link RingCommunicator}'s bit for bit on every rank, for every op and odd sizes (empty chunks too).
 */
class RingAllReduceHostTest {

    @ParameterizedTest
    @CsvSource({"1,1001", "2,1", "2,1001", "3,2", "3,1001", "4,7", "5,3", "5,1003", "7,0"})
    void theNcclLoopOnHostLinksMatchesRingCommunicator(int n, int count) throws Exception {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        float[][] in = new float[n][count];
        for (float[] x : in) {
            for (int i = 0; i < count; i++) {
                x[i] = (float) rnd.nextDouble(-3, 3);
            }
        }
        for (ReduceOp op : ReduceOp.values()) {
            float[][] host = runOnHost(in, op);
            float[][] ref = RingScheduleTest.ringCommunicator(in, op);
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < count; i++) {
                    assertThat(Float.floatToRawIntBits(host[r][i])).as("%s rank %d element %d, seed %d", op, r, i, seed)
                            .isEqualTo(Float.floatToRawIntBits(ref[r][i]));
                }
            }
        }
    }

    /** N threads, each running {@link RingAllReduce#run} for its rank over queue links and Java arithmetic. */
    private static float[][] runOnHost(float[][] in, ReduceOp op) throws Exception {
        int n = in.length, count = in[0].length;
        List<BlockingQueue<float[]>> inbox = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            inbox.add(new LinkedBlockingQueue<>());
        }
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try (Arena arena = Arena.ofShared()) {
            List<Future<float[]>> out = new ArrayList<>();
            for (int rank = 0; rank < n; rank++) {
                int r = rank;
                out.add(pool.submit(() -> {
                    MemorySegment buf = arena.allocate(4L * Math.max(count, 1));
                    MemorySegment.copy(in[r], 0, buf, ValueLayout.JAVA_FLOAT, 0, count);
                    MemorySegment scratch = arena.allocate(4L * RingAllReduce.scratchFloats(count, n));
                    RingAllReduce.Link link = (send, sendCount, recv, recvCount) -> {
                        // the grouped send and receive: what goes right, then what came from the left
                        inbox.get((r + 1) % n).add(send.asSlice(0, 4 * sendCount).toArray(ValueLayout.JAVA_FLOAT));
                        float[] got = take(inbox.get(r));
                        assertThat((long) got.length).as("rank %d receives what its left sent", r).isEqualTo(recvCount);
                        MemorySegment.copy(got, 0, recv, ValueLayout.JAVA_FLOAT, 0, got.length);
                    };
                    RingAllReduce.run(n, r, buf, count, op, scratch, link, JAVA);
                    return buf.asSlice(0, 4L * count).toArray(ValueLayout.JAVA_FLOAT);
                }));
            }
            float[][] result = new float[n][];
            for (int r = 0; r < n; r++) {
                result[r] = out.get(r).get(60, TimeUnit.SECONDS);
            }
            for (BlockingQueue<float[]> q : inbox) {
                assertThat(q).as("every chunk sent was received").isEmpty();
            }
            return result;
        } finally {
            pool.shutdownNow();
        }
    }

    private static float[] take(BlockingQueue<float[]> q) {
        float[] got;
        try {
            got = q.poll(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted while waiting for the left's chunk", e);
        }
        assertThat(got).as("a chunk arrives from the left within 30 s").isNotNull();
        return got;
    }

    /** ring_combine_f32 and ring_divide_f32's arithmetic, as RingHostCheckTest checks the kernels against. */
    private static final RingAllReduce.Reducer JAVA = new RingAllReduce.Reducer() {
        @Override
        public void combine(MemorySegment acc, MemorySegment in, long n, boolean max) {
            for (long i = 0; i < n; i++) {
                float a = acc.getAtIndex(ValueLayout.JAVA_FLOAT, i), b = in.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                acc.setAtIndex(ValueLayout.JAVA_FLOAT, i, max ? Math.max(a, b) : a + b);
            }
        }

        @Override
        public void divide(MemorySegment x, long n, float divisor) {
            for (long i = 0; i < n; i++) {
                x.setAtIndex(ValueLayout.JAVA_FLOAT, i, x.getAtIndex(ValueLayout.JAVA_FLOAT, i) / divisor);
            }
        }
    };
}
