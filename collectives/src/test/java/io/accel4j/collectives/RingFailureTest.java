package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Failures never hang and never pass silently: a rank that throws, is killed, closes its communicator or never
 * arrives makes every other rank fail with a {@link CollectiveException} naming the collective, the rank and the
 * elapsed time, within the timeout; mismatched calls and bad arguments are refused.
 */
class RingFailureTest {

    static final int COUNT = 100_003;

    /** Runs {@code body} on every rank except {@code odd}, which runs {@code oddBody}; collects the exceptions. */
    static ConcurrentHashMap<Integer, CollectiveException> failures(InProcessGroup g, int odd,
                                                                   InProcessGroup.RankBody<Void> oddBody) {
        ConcurrentHashMap<Integer, CollectiveException> seen = new ConcurrentHashMap<>();
        try {
            g.run(comm -> {
                if (comm.rank() == odd) {
                    return oddBody.run(comm);
                }
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment buf = arena.allocate(COUNT * 4L);
                    comm.allReduce(buf, COUNT, DType.FP32, ReduceOp.SUM); // #1 succeeds everywhere
                    comm.allReduce(buf, COUNT, DType.FP32, ReduceOp.SUM); // #2 is where the odd rank misbehaves
                } catch (CollectiveException e) {
                    seen.put(comm.rank(), e);
                    throw e;
                }
                return null;
            });
        } catch (RuntimeException expected) {
            // run rethrows the failure of the rank at fault
        }
        return seen;
    }

    static void oneAllReduce(Communicator comm) {
        try (Arena arena = Arena.ofConfined()) {
            comm.allReduce(arena.allocate(COUNT * 4L), COUNT, DType.FP32, ReduceOp.SUM);
        }
    }

    static void assertNamed(ConcurrentHashMap<Integer, CollectiveException> seen, int n, int culprit,
                            double maxSeconds, String... words) {
        assertThat(seen.keySet()).as("every other rank failed").hasSize(n - 1).doesNotContain(culprit);
        for (CollectiveException e : seen.values()) {
            // #2 is where the culprit fails; a rank the machine's load kept behind may still be finishing #1
            assertThat(e.getMessage()).containsPattern("allReduce #[12] ").contains("rank " + culprit)
                    .contains(words);
            assertThat(e.collective()).isEqualTo("allReduce");
            assertThat(e.culprits()).contains(culprit);
            assertThat(e.elapsed()).isLessThan(Duration.ofMillis((long) (maxSeconds * 1000)));
        }
    }

    @Test
    void aRankThatThrowsMidCollectiveFailsTheOthersPromptly() {
        int n = 4, dead = 2;
        long t0 = System.nanoTime();
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(2))) {
            var seen = failures(g, dead, comm -> {
                oneAllReduce(comm);
                Thread.sleep(50); // the others are waiting in #2 by now
                throw new IllegalStateException("rank 2 exploded");
            });
            assertNamed(seen, n, dead, 1.5, "rank 2 exploded");
        }
        assertThat(System.nanoTime() - t0).isLessThan(TimeUnit.SECONDS.toNanos(2));
    }

    @Test
    void aKilledRankFailsTheOthers() {
        int n = 3, dead = 0;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(2))) {
            var seen = failures(g, dead, comm -> {
                oneAllReduce(comm);
                Thread.sleep(50);
                g.kill(dead);
                return null;
            });
            assertNamed(seen, n, dead, 1.5, "was killed");
        }
    }

    @Test
    void aRankThatClosesItsCommunicatorFailsTheOthers() {
        int n = 3, gone = 1;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(2))) {
            var seen = failures(g, gone, comm -> {
                oneAllReduce(comm);
                comm.close();
                return null;
            });
            assertNamed(seen, n, gone, 1.5, "closed its communicator");
        }
    }

    @Test
    void closingACommunicatorWithAnAsyncCollectiveInFlightFailsTheOthers() {
        var seen = new ConcurrentHashMap<Integer, CollectiveException>();
        try (InProcessGroup g = InProcessGroup.create(3, Duration.ofSeconds(2)); Arena arena = Arena.ofShared()) {
            assertThatThrownBy(() -> g.run(comm -> {
                MemorySegment buf = arena.allocate(COUNT * 4L);
                if (comm.rank() == 1) {
                    Pending p = comm.allReduceAsync(buf, COUNT, DType.FP32, ReduceOp.SUM);
                    Thread.sleep(50);
                    assertThat(p.isDone()).as("the others have not arrived").isFalse();
                    comm.close();
                    assertThatThrownBy(p::await).isInstanceOf(CollectiveException.class);
                    return null;
                }
                Thread.sleep(200);
                try {
                    comm.allReduce(buf, COUNT, DType.FP32, ReduceOp.SUM);
                } catch (CollectiveException e) {
                    seen.put(comm.rank(), e);
                    throw e;
                }
                return null;
            })).isInstanceOf(CollectiveException.class);
        }
        assertThat(seen.keySet()).containsExactlyInAnyOrder(0, 2);
        assertThat(seen.values()).allSatisfy(e -> {
            assertThat(e.getMessage()).contains("allReduce #1").contains("rank 1 closed its communicator mid-collective");
            assertThat(e.elapsed()).isLessThan(Duration.ofMillis(500));
        });
    }

    @Test
    void aRankThatNeverArrivesTimesOutNamingItAndTheElapsedTime() throws InterruptedException {
        // The timeout is generous for a loaded 2-core machine: the ranks' first collective must not time out too.
        int n = 3, late = 2;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(2))) {
            long t0 = System.nanoTime();
            var seen = new ConcurrentHashMap<Integer, CollectiveException>();
            seen.putAll(failures(g, late, comm -> {
                oneAllReduce(comm);
                // never calls #2 (and does not close) until the others have given up
                while (!g.hasFailed() && System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(30)) {
                    Thread.sleep(10);
                }
                return null;
            }));
            assertNamed(seen, n, late, 10, "did not arrive", "within the timeout (PT2S");
            // the rank that timed out waited the whole timeout; the others count from their own (later) start
            assertThat(seen.values().stream().map(CollectiveException::elapsed).max(Duration::compareTo).orElseThrow())
                    .isGreaterThanOrEqualTo(Duration.ofSeconds(2));
            for (CollectiveException e : seen.values()) {
                assertThat(e.getMessage()).containsPattern("failed after \\d\\.\\d{3} s");
            }
            assertThat(System.nanoTime() - t0).isLessThan(TimeUnit.SECONDS.toNanos(30));
        }
    }


    @Test
    void aBrokenGroupRefusesLaterCollectivesAtOnce() {
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(2)); Arena arena = Arena.ofShared()) {
            g.kill(1);
            Communicator c0 = g.communicator(0);
            long t0 = System.nanoTime();
            assertThatThrownBy(() -> c0.allReduce(arena.allocate(4), 1, DType.FP32, ReduceOp.SUM))
                    .isInstanceOf(CollectiveException.class).hasMessageContaining("rank 1 was killed");
            assertThatThrownBy(() -> c0.barrierAsync().await()).isInstanceOf(CollectiveException.class);
            assertThat(System.nanoTime() - t0).isLessThan(TimeUnit.MILLISECONDS.toNanos(500));
        }
    }

    @Test
    void mismatchedCallsAreDetected() {
        var seen = new ConcurrentHashMap<Integer, CollectiveException>();
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(2))) {
            assertThatThrownBy(() -> g.run(comm -> {
                try (Arena arena = Arena.ofConfined()) {
                    long count = 5 + comm.rank(); // rank 1 disagrees on the length
                    comm.allReduce(arena.allocate(count * 4), count, DType.FP32, ReduceOp.SUM);
                } catch (CollectiveException e) {
                    seen.put(comm.rank(), e);
                    throw e;
                }
                return null;
            })).isInstanceOf(CollectiveException.class);
        }
        assertThat(seen).isNotEmpty();
        assertThat(seen.values()).allSatisfy(e -> assertThat(e.getMessage()).contains("called different collectives")
                .contains("allReduce #1 (5 × FP32, SUM)").contains("allReduce #1 (6 × FP32, SUM)"));
    }

    @Test
    void badArgumentsAreRefusedAtTheCallNamingTheArgument() {
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(2)); Arena arena = Arena.ofShared()) {
            Communicator c = g.communicator(0);
            MemorySegment buf = arena.allocate(40);
            assertThatThrownBy(() -> c.allReduce(buf, 11, DType.FP32, ReduceOp.SUM))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("buf holds 10");
            assertThatThrownBy(() -> c.allReduce(buf, 4, DType.FP16, ReduceOp.SUM))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("FP16");
            assertThatThrownBy(() -> c.reduceScatter(buf, buf.asSlice(4), 8, DType.FP32, ReduceOp.SUM))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("recv overlaps send");
            assertThatThrownBy(() -> c.broadcast(buf, 1, DType.FP32, 2))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("root must be in [0, 2)");
            assertThatThrownBy(() -> c.send(buf, 1, DType.FP32, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("peer must differ");
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment mine = confined.allocate(4);
                assertThatThrownBy(() -> c.allReduceAsync(mine, 1, DType.FP32, ReduceOp.SUM))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("confined");
            }
            c.close();
            assertThatThrownBy(() -> c.barrier()).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
        }
    }

    @Test
    void aSingleRankGroupNeedsNobody() {
        try (InProcessGroup g = InProcessGroup.create(1, Duration.ofSeconds(1))) {
            List<Object> out = g.run(comm -> {
                comm.barrier();
                oneAllReduce(comm);
                return comm.size();
            });
            assertThat(out).containsExactly(1);
        }
    }
}
